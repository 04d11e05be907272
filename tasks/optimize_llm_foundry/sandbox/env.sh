# Sourced by solution/finetune.sh (`source ../env.sh`). It puts the LLM Foundry stack first on PATH and sets
# BASE_MODEL to the base model folder next to this file (paths are computed here: the workspace may be copied).
# The stack has a virtual environment of its own (it pins its own torch). Which one, in this order:
# $REBENCH_LLM_FOUNDRY_VENV, else /opt/llm-foundry (the task's container image), else
# ~/.local/share/rebench/llm-foundry-venv (a local run).
_env_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ -n "${REBENCH_LLM_FOUNDRY_VENV:-}" ]; then
    _venv=$REBENCH_LLM_FOUNDRY_VENV
elif [ -d /opt/llm-foundry ]; then
    _venv=/opt/llm-foundry
else
    _venv=${HOME:-}/.local/share/rebench/llm-foundry-venv
fi
if [ ! -x "$_venv/bin/python" ]; then
    echo "env.sh: no LLM Foundry environment at $_venv" >&2
    return 1
fi
export VIRTUAL_ENV=$_venv
export PATH=$_venv/bin:$PATH
export BASE_MODEL=$_env_dir/base_model
unset _env_dir _venv
