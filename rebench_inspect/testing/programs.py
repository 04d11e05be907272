"""An environment's preparation and scoring programs run the way the host runs them, for tests: staged root-only by
the host's own staging, started by its own command builders, in a fresh process (docs/CONTRACT.md).

From the host package only its public face and `rebench_inspect.runtime.staging` are imported: the builders there are
the code path the scorer and `rebench score` use, so what passes here passes there.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rebench_inspect import EnvironmentSpec, Scale
from rebench_inspect.runtime.staging import prepare_command, scoring_command, stage_tree

RESULT_KEYS = {"valid", "raw", "message", "details"}


def stage_scoring_program(environment: EnvironmentSpec, protected: Path) -> Path:
    """Fresh copy of the staged tree in `<protected>/code` (mode 700, as in the sandbox); returns that folder."""
    code = protected / "code"
    shutil.rmtree(code, ignore_errors=True)
    stage_tree(environment, code)
    os.chmod(protected, 0o700)
    os.chmod(code, 0o700)
    return code


def _run_staged(
    build_command: Callable[..., tuple[list[str], str]],
    environment: EnvironmentSpec,
    scale: Scale,
    code: str | Path,
    workspace: Path,
    protected: Path,
    *,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None,
    timeout: float,
    **options: Any,
) -> subprocess.CompletedProcess:
    """The program `build_command` (a builder of `runtime.staging`) starts from the staged tree in `code`."""
    argv, cwd = build_command(
        environment.at(scale), python=sys.executable, code_dir=code, workspace=workspace, protected=protected, **options
    )
    return subprocess.run(
        [*argv, *extra], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(env) if env else None
    )


def run_scoring_program(
    environment: EnvironmentSpec,
    workspace: Path,
    protected: Path,
    *,
    scale: Scale = "smoke",
    run_as: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    staged: Path | None = None,
) -> subprocess.CompletedProcess:
    """The scoring program's process; its result file is `protected/result.json`. `staged`: a tree staged already
    (`stage_scoring_program`, then changed by the test); None: a fresh one."""
    code = staged or stage_scoring_program(environment, protected)
    result = protected / "result.json"
    result.unlink(missing_ok=True)
    return _run_staged(
        scoring_command,
        environment,
        scale,
        code,
        workspace,
        protected,
        env=env,
        timeout=timeout,
        result=result,
        run_as=run_as,
    )


def run_preparation(
    environment: EnvironmentSpec,
    workspace: Path,
    protected: Path,
    *,
    scale: Scale = "smoke",
    setup: bool = True,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess:
    """The preparation program staged and run as the host runs it (`extra`: more of its options, e.g. --no-cache)."""
    with tempfile.TemporaryDirectory(prefix="rebench-prepare-") as code:
        stage_tree(environment, Path(code))
        return _run_staged(
            prepare_command,
            environment,
            scale,
            code,
            workspace,
            protected,
            extra=extra,
            env=env,
            timeout=timeout,
            setup=setup,
        )


def scoring_result(environment: EnvironmentSpec, workspace: Path, protected: Path, **kwargs: Any) -> dict:
    """Score and return the result; asserts that the scoring program itself ran (exit 0, one JSON object)."""
    completed = run_scoring_program(environment, workspace, protected, **kwargs)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads((protected / "result.json").read_text())
    assert set(result) == RESULT_KEYS
    return result
