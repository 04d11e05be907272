"""Where the LLM Foundry stack lives: its own virtual environment, apart from the sandbox's Python.

LLM Foundry 0.11.0 pins torch 2.3 (the rest of rebench uses torch 2.13), so the stack has a venv of its own, made by
`sandboxes/optimize_llm_foundry/install_llm_foundry.sh VENV SCALE`. One rule finds it, here and in the agent's
`env.sh` (which repeats it in bash):
  $REBENCH_LLM_FOUNDRY_VENV if set, else /opt/llm-foundry if it exists (the images), else
  ~/.local/share/rebench/llm-foundry-venv (a local run on the host).

Staged beside score.py and prepare.py. `python stack.py` prints the venv and exits 0 when it is usable, else says
what is missing and how to install it and exits 1 (the host's `rebench demo` / `rebench preflight` run it).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

VENV_VARIABLE = "REBENCH_LLM_FOUNDRY_VENV"
IMAGE_VENV = Path("/opt/llm-foundry")
INSTALLER = "sandboxes/optimize_llm_foundry/install_llm_foundry.sh"


def host_venv() -> Path:
    return Path.home() / ".local" / "share" / "rebench" / "llm-foundry-venv"


def llm_foundry_venv() -> Path:
    if os.environ.get(VENV_VARIABLE):
        return Path(os.environ[VENV_VARIABLE])
    return IMAGE_VENV if IMAGE_VENV.exists() else host_venv()


def llm_foundry_python() -> Path:
    """The stack's interpreter; raises with the installer's command line when the venv is missing or incomplete."""
    problem = stack_problem()
    if problem:
        raise FileNotFoundError(problem)
    return llm_foundry_venv() / "bin" / "python"


def installed_versions(venv: Path) -> list[str]:
    """The llm-foundry versions installed in `venv` (read from its package metadata: no interpreter started)."""
    return sorted(
        p.name.removesuffix(".dist-info").split("-")[1]
        for p in venv.glob("lib/python3*/site-packages/llm_foundry-*.dist-info")
    )


def stack_problem() -> str | None:
    """None when the venv is usable, else what is missing and how to install it."""
    venv = llm_foundry_venv()
    if (venv / "bin" / "python").exists() and installed_versions(venv):
        return None
    state = "has no llm-foundry" if venv.exists() else "is missing"
    return (
        f"the LLM Foundry stack venv {venv} {state}: install it with `bash {INSTALLER} {venv} smoke` from a rebench "
        f"clone (about 4 minutes and 7 GB; `full` adds flash-attention for GPUs), or point ${VENV_VARIABLE} at one"
    )


if __name__ == "__main__":
    found = stack_problem()
    print(
        found
        or f"LLM Foundry stack: {llm_foundry_venv()} (llm-foundry {', '.join(installed_versions(llm_foundry_venv()))})"
    )
    sys.exit(1 if found else 0)
