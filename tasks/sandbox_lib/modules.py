"""How a program of the staged tree runs: `python -m <module>` from the folder holding the `rebench` package slice.

The host stages `rebench/__init__.py`, the declared libraries, `rebench/<env>/__init__.py` and `rebench/<env>/sandbox/`
root-only into `<protected>/code` (rebench_inspect.runtime.staging) and runs its entry points with `module_command`; a
scoring program runs its own helpers the same way. The import path is the working directory, never `PYTHONPATH`:
the scorer's environment reaches the agent's demoted processes (`run_untrusted`), so a variable would change what
the agent's code imports. A helper that runs as another user cannot read the root-only tree: `copy_modules` copies
the modules it needs, at their package paths, into a folder that user can read, and it runs from there. A scoring
program's own evaluation step (root, reading held-out data) runs to its JSON outcome with `evaluate_in_root_process`.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from .program import Invalid
from .result import Reason

# The folder holding the staged `rebench` package (<protected>/code in the sandbox).
CODE_ROOT = Path(__file__).resolve().parents[2]

EVALUATION_TOO_SLOW = Reason("evaluating the model took longer than {timeout_s:.0f} s")
EVALUATION_FAILED = Reason("evaluating the model failed")


def module_command(
    module: str,
    arguments: Sequence[str] = (),
    *,
    python: str = sys.executable,
    code_dir: str | Path = CODE_ROOT,
    isolated: bool = False,
) -> tuple[list[str], str]:
    """`(argv, cwd)` running `python -m module arguments...` from `code_dir`. `isolated`: leave `PYTHON*` variables
    and the user's site folder out (what `python -I` does, less the working directory that `-m` needs)."""
    flags = ["-E", "-s"] if isolated else []
    return [python, *flags, "-m", module, *arguments], str(code_dir)


def copy_modules(modules: Iterable[str], destination: Path) -> list[Path]:
    """Copy `modules` (dotted names, e.g. `rebench.optimize_kernel.sandbox.kernel_worker`) and the package
    `__init__.py` files above them into `destination`, at their package paths; folders mode 755, files 644. Returns
    every folder and file it made below `destination` (made mode 755 where missing), for the caller to hand to the
    user that runs them."""
    if not destination.exists():
        destination.mkdir(mode=0o755, parents=True)
        destination.chmod(0o755)
    made: list[Path] = []
    for module in modules:
        parts = module.split(".")
        for depth in range(1, len(parts) + 1):
            name = ".".join(parts[:depth])
            is_package = depth < len(parts)
            target = (
                destination.joinpath(*parts[:depth], "__init__.py")
                if is_package
                else destination.joinpath(*parts[:-1], f"{parts[-1]}.py")
            )
            if target.exists():
                continue
            if not target.parent.exists():
                target.parent.mkdir(mode=0o755)
                target.parent.chmod(0o755)
                made.append(target.parent)
            spec = importlib.util.find_spec(name)
            if spec is None or spec.origin is None:
                raise ModuleNotFoundError(f"no module {name} to copy")
            shutil.copyfile(spec.origin, target)
            target.chmod(0o644)
            made.append(target)
    return made


def evaluate_in_root_process(
    module: str,
    arguments: Sequence[str],
    outcome_file: Path,
    *,
    timeout: float,
    env: dict[str, str],
    refusal: Callable[[Any], Reason],
) -> dict[str, Any]:
    """Run the scoring program's own evaluation `module` as root in a process of its own (it reads held-out data and
    imports no code of the agent's) and return the outcome it wrote to `outcome_file`, `{"ok": true, ...}`.
    `Invalid` when it runs past `timeout` or fails (its output is never read), or when it refused the submission:
    `refusal(code)` is the scorer's sentence for the outcome's `refused` code."""
    command, cwd = module_command(module, arguments, isolated=True)
    try:
        evaluation = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        raise Invalid(EVALUATION_TOO_SLOW, timeout_s=timeout) from None
    if evaluation.returncode != 0 or not outcome_file.is_file():
        raise Invalid(EVALUATION_FAILED)
    outcome = json.loads(outcome_file.read_text())
    if not outcome.get("ok"):
        raise Invalid(refusal(outcome.get("refused")))
    return outcome
