#!/usr/bin/env bash
# Base layer: system packages, a Python venv on PATH (login shells too), the agent user, and the root-only protected
# folder.
set -euo pipefail

apt-get update
apt-get install -y --no-install-recommends \
    python3 python3-venv python3-dev build-essential ca-certificates coreutils git procps util-linux
rm -rf /var/lib/apt/lists/*

python3 -m venv "${VIRTUAL_ENV:-/opt/venv}"

# The agent's bash and python tools run login shells (`bash --login -c`), and a login shell's /etc/profile resets PATH
# to the distribution's default, dropping the venv: give every login shell the image's PATH (the venv first, then the
# parent image's folders, e.g. CUDA's), as every other process in the container has it.
printf '# rebench: the image PATH (sandboxes/base/install_base.sh)\nexport PATH="%s"\n' "$PATH" \
    >/etc/profile.d/rebench-path.sh
chmod 644 /etc/profile.d/rebench-path.sh

# The agent works as this unprivileged user; it can neither read nor write /protected.
id -u agent >/dev/null 2>&1 || useradd --create-home --shell /bin/bash agent
mkdir -p /home/agent/workspace /protected
chown -R agent:agent /home/agent
chmod 700 /protected
