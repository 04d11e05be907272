"""The host's root commands around scoring (the final stop, freezing and resuming the agent users' processes) run
from the staged tree as the sandbox runs them, for tests; the preparation and scoring programs themselves run through
`rebench_inspect.testing.programs`."""

import os
import pwd
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from rebench_inspect.runtime.layout import SandboxLayout
from rebench_inspect.runtime.scoring import stop_command, users_command
from rebench_inspect.runtime.staging import stage_tree
from rebench_inspect.spec.environment import EnvironmentSpec


def _staged_layout(environment: EnvironmentSpec, agent_user: str | None, protected: Path) -> SandboxLayout:
    layout = SandboxLayout(
        workspace=str(protected.parent / "workspace"),
        protected=str(protected),
        python=sys.executable,
        agent_user=agent_user,
        is_container=True,
    )
    stage_tree(environment, Path(layout.code_dir))
    return layout


def run_final_stop(environment: EnvironmentSpec, agent_user: str, protected: Path) -> subprocess.CompletedProcess:
    """The host's stop before the final score, as it runs in the sandbox: from the staged tree, as root."""
    command, cwd = stop_command(environment, _staged_layout(environment, agent_user, protected))
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=180)


def run_users_command(
    environment: EnvironmentSpec, protected: Path, arguments: Sequence[str]
) -> subprocess.CompletedProcess:
    """Another of the host's root commands over the agent users' processes (freeze, resume), as the host runs it."""
    command, cwd = users_command(_staged_layout(environment, None, protected), arguments)
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=180)


def users_can_run(users: tuple[str, ...], probe: str, as_user: str) -> bool:
    """Root, every one of `users` exists (the image's), and the shell command `probe` succeeds as `as_user`."""
    if os.geteuid() != 0:
        return False
    try:
        for user in users:
            pwd.getpwnam(user)
    except KeyError:
        return False
    return subprocess.run(["su", "-s", "/bin/sh", as_user, "-c", probe], capture_output=True).returncode == 0
