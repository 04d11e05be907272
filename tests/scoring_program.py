"""Run an environment's scoring program the way the host does, for tests: staged root-only by the host's own
staging, in a fresh process, one JSON result (docs/CONTRACT.md)."""

import json
import os
import pwd
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from rebench_inspect.environment import EnvironmentSpec
from rebench_inspect.layout import SandboxLayout
from rebench_inspect.scoring import stop_command
from rebench_inspect.staging import scoring_command, stage_tree

RESULT_KEYS = {"valid", "raw", "message", "details"}


def stage_scoring_program(environment: EnvironmentSpec, protected: Path) -> Path:
    """Fresh copy of the scoring program in `<protected>/scoring` (mode 700, as in the sandbox); returns score.py."""
    scoring = protected / "scoring"
    shutil.rmtree(scoring, ignore_errors=True)
    stage_tree(environment, scoring)
    os.chmod(protected, 0o700)
    os.chmod(scoring, 0o700)
    return scoring / "score.py"


def run_scoring_program(
    environment: EnvironmentSpec,
    workspace: Path,
    protected: Path,
    *,
    scale: str = "smoke",
    run_as: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess:
    """The scoring program's process; its result file is `protected/result.json`."""
    score = stage_scoring_program(environment, protected)
    result = protected / "result.json"
    result.unlink(missing_ok=True)
    cmd = scoring_command(
        environment, scale, python=sys.executable, scoring_dir=score.parent, workspace=workspace,
        protected=protected, result=result, run_as=run_as,
    )
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=dict(env) if env else None)


def scoring_result(environment: EnvironmentSpec, workspace: Path, protected: Path, **kwargs) -> dict:
    """Score and return the result; asserts that the scoring program itself ran (exit 0, one JSON object)."""
    completed = run_scoring_program(environment, workspace, protected, **kwargs)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads((protected / "result.json").read_text())
    assert set(result) == RESULT_KEYS
    return result


def run_final_stop(environment: EnvironmentSpec, agent_user: str, protected: Path) -> subprocess.CompletedProcess:
    """The host's stop before the final score, as it runs in the sandbox: the staged script, as root."""
    layout = SandboxLayout(
        workspace=str(protected.parent / "workspace"),
        protected=str(protected),
        python=sys.executable,
        agent_user=agent_user,
        is_container=True,
    )
    stage_tree(environment, Path(layout.scoring_dir))
    return subprocess.run(stop_command(environment, layout), capture_output=True, text=True, timeout=180)


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
