#!/usr/bin/env bash
# install_llm_foundry.sh VENV_DIR SCALE: optimize_llm_foundry's LLM Foundry stack in a virtual environment of its
# own (it pins torch 2.3; the rest of rebench uses torch 2.13). The image runs it for /opt/llm-foundry (through
# rebench-build-run), CI and users for local runs with ~/.local/share/rebench/llm-foundry-venv (how the stack is found:
# tasks/optimize_llm_foundry/sandbox/stack.py).
#   smoke: requirements.txt from PyPI (torch's PyPI wheel is the CUDA build; it runs on CPU too): about 3.5 minutes
#          and 6.7 GB on a 2-core machine. Binary wheels for Python 3.11 (the smoke image's Debian 12) and 3.12
#          (the full image's Ubuntu 24.04; resolved with `pip install --dry-run`).
#   full:  also requirements-full.txt (flash-attention 2 for the GPUs). flash-attn's build step downloads the
#          prebuilt wheel for this torch/CUDA/Python from the flash-attention GitHub release; where none matches it
#          compiles the kernels, which needs the CUDA compiler (nvcc: a CUDA *devel* image or toolkit, CUDA_HOME)
#          and an hour or more. Not tested on the CPU-only development machines.
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
stamp=$venv/rebench-stack.txt
wanted="$(cat "${requirements[@]}")
# scale: $scale"
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
    # flash-attn's setup.py imports torch, packaging and wheel: it is built against the torch installed above.
    "${pip[@]}" packaging wheel ninja
    if [ -z "${CUDA_HOME:-}" ] && ! command -v nvcc >/dev/null; then
        echo "no CUDA compiler here: flash-attn can only come from its prebuilt wheel"
        export FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE
    fi
    MAX_JOBS=${MAX_JOBS:-4} "${pip[@]}" --no-build-isolation -r "$here/requirements-full.txt"
    if ! "$venv/bin/python" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("flash_attn_2_cuda") is None)'; then
        echo "flash-attn has no compiled kernels: its prebuilt wheel could not be fetched and there is no CUDA" \
            "compiler to build them (use a CUDA devel image, or set CUDA_HOME)" >&2
        exit 1
    fi
fi
"$venv/bin/python" -c 'from importlib.metadata import version as v; print("llm-foundry", v("llm-foundry"), "composer", v("mosaicml"), "torch", v("torch"), "transformers", v("transformers"))'
printf '%s\n' "$wanted" >"$stamp"
echo "LLM Foundry stack ($scale) installed in $venv in $(($(date +%s) - started)) s"
