#!/usr/bin/env bash
# install_llm_foundry.sh VENV_DIR SCALE: optimize_llm_foundry's LLM Foundry stack in a virtual environment of its
# own (it pins torch 2.3; the rest of rebench uses torch 2.13). The image runs it for /opt/llm-foundry (through
# rebench-build-run), CI and users for local runs with ~/.local/share/rebench/llm-foundry-venv (how the stack is found:
# tasks/optimize_llm_foundry/sandbox/stack.py).
#   smoke: requirements.txt from PyPI (torch's PyPI wheel is the CUDA build; it runs on CPU too): about 3.5 minutes
#          and 6.7 GB on a 2-core machine. Binary wheels for Python 3.11 (the images' Debian 12) and 3.12 (resolved
#          with `pip install --dry-run`).
#   full:  also flash-attention 2 for the GPUs (requirements-full.txt pins its version), from a prebuilt wheel that
#          FLASH_ATTN_WHEEL names (a file, a URL, or a file name the image build serves on $BUILD_FILES/wheels/):
#          PyPI has only its source, whose build step downloads a wheel from GitHub or else compiles the CUDA kernels
#          (nvcc, an hour or more), neither of which a build should do unasked. FLASH_ATTN_WHEEL=none leaves it out
#          (a rehearsal without the wheel: the image check then reports it missing). Not tested on a GPU.
# Idempotent and cheap when done: a stamp in the venv records what was installed for which scale.
set -euo pipefail
usage="usage: install_llm_foundry.sh VENV_DIR smoke|full"
venv=${1:?$usage}
scale=${2:?$usage}
here=$(cd "$(dirname "$0")" && pwd)
case "$scale" in
    smoke) requirements=("$here/requirements.txt") ;;
    full) requirements=("$here/requirements.txt" "$here/requirements-full.txt") ;;
    *) echo "$usage" >&2; exit 2 ;;
esac
pinned=$(sed -n 's/^flash-attn==//p' "$here/requirements-full.txt")
if [ "$scale" = full ] && [ -z "${FLASH_ATTN_WHEEL:-}" ]; then  # said before anything is installed
    echo "install_llm_foundry.sh full: flash-attn $pinned has no wheel on PyPI, and its source build downloads" \
        "one from GitHub or compiles CUDA kernels for an hour. Name a prebuilt wheel for torch 2.3, CUDA 12 and" \
        "this Python: FLASH_ATTN_WHEEL=FILE_OR_URL (image: \`rebench images build optimize_llm_foundry" \
        "--flash-attn-wheel FILE\`), e.g. the asset" \
        "flash_attn-$pinned+cu123torch2.3cxx11abiFALSE-cp311-cp311-linux_x86_64.whl of flash-attention's" \
        "v$pinned release; FLASH_ATTN_WHEEL=none leaves it out" >&2
    exit 1
fi
stamp=$venv/rebench-stack.txt
wanted="$(cat "${requirements[@]}")
# scale: $scale${FLASH_ATTN_WHEEL:+, flash-attn: $FLASH_ATTN_WHEEL}"
if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$wanted" ]; then
    echo "LLM Foundry stack already installed in $venv ($scale)"
    exit 0
fi

started=$(date +%s)
[ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
rm -f "$stamp"
pip=("$venv/bin/python" -m pip install --progress-bar off)
"${pip[@]}" -r "$here/requirements.txt"
if [ "$scale" = full ]; then
    case "${FLASH_ATTN_WHEEL:-}" in
        none) echo "flash-attn left out (FLASH_ATTN_WHEEL=none): this stack cannot train with flash attention" ;;
        http://* | https://* | /*) "${pip[@]}" "$FLASH_ATTN_WHEEL" ;;
        *) "${pip[@]}" "${BUILD_FILES:?a bare wheel name needs BUILD_FILES}/wheels/$FLASH_ATTN_WHEEL" ;;
    esac
    if [ "${FLASH_ATTN_WHEEL}" != none ]; then
        installed=$("$venv/bin/python" -c 'from importlib.metadata import version; print(version("flash-attn"))')
        if [ "${installed%%+*}" != "$pinned" ]; then
            echo "FLASH_ATTN_WHEEL is flash-attn $installed; the stack pins $pinned (requirements-full.txt)" >&2
            exit 1
        fi
    fi
fi
"$venv/bin/python" -c 'from importlib.metadata import version as v; print("llm-foundry", v("llm-foundry"), "composer", v("mosaicml"), "torch", v("torch"), "transformers", v("transformers"))'
printf '%s\n' "$wanted" >"$stamp"
echo "LLM Foundry stack ($scale) installed in $venv in $(($(date +%s) - started)) s"
