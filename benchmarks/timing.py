"""What the timing scripts beside this file share: the machine they ran on, an environment's preparation and scoring
programs started as the host starts them (rebench_inspect.runtime.staging's command builders, on a tree the script
staged), and its reference solution run as the tests' fixtures run it, each timed from outside.

The scripts run as `python benchmarks/<script>.py`, which puts this folder first on the import path: they import it
as `timing`.
"""

import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rebench_inspect import EnvironmentSpec, Scale
from rebench_inspect.runtime.reference import REFERENCE_SCRIPT
from rebench_inspect.runtime.staging import prepare_command, reference_files, scoring_command


def machine() -> str:
    """The machine in a few words, for a report: timings mean little without it."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs"


def timed(command: list[str], **kwargs: Any) -> float:
    """Seconds `command` took (its output captured; `kwargs` go to subprocess.run). A failed command ends the script
    with the end of its stderr."""
    started = time.perf_counter()
    completed = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    seconds = time.perf_counter() - started
    if completed.returncode != 0:
        sys.exit(f"{shlex.join(command)} failed (exit {completed.returncode}):\n{completed.stderr[-3000:]}")
    return seconds


def time_preparation(
    environment: EnvironmentSpec,
    code: Path,
    workspace: Path,
    protected: Path,
    *,
    setup: bool,
    env: dict[str, str] | None = None,
) -> float:
    """Seconds one smoke-scale run of the preparation program staged in `code` took."""
    command, cwd = prepare_command(
        environment.at("smoke"),
        python=sys.executable,
        code_dir=code,
        workspace=workspace,
        protected=protected,
        setup=setup,
    )
    return timed(command, cwd=cwd, env=env)


def time_scoring(
    environment: EnvironmentSpec,
    code: Path,
    workspace: Path,
    protected: Path,
    *,
    scale: Scale = "smoke",
    env: dict[str, str] | None = None,
) -> tuple[float, dict]:
    """Seconds one run of the scoring program staged in `code` took, and its result (`protected/result.json`)."""
    result = protected / "result.json"
    command, cwd = scoring_command(
        environment.at(scale),
        python=sys.executable,
        code_dir=code,
        workspace=workspace,
        protected=protected,
        result=result,
    )
    seconds = timed(command, cwd=cwd, env=env)
    return seconds, json.loads(result.read_text())


def time_reference(environment: EnvironmentSpec, workspace: Path, *, env: dict[str, str] | None = None) -> float:
    """Seconds the reference solution took at smoke scale: its files copied over `workspace`, then its script run
    there (`env`: variables beyond this process's own, e.g. a model endpoint)."""
    for relative, source in reference_files(environment).items():
        (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, workspace / relative)
    variables = {**os.environ, **(env or {}), "REBENCH_SCALE": "smoke", "PYTHON": sys.executable}
    return timed(["bash", REFERENCE_SCRIPT], cwd=workspace, env=variables)
