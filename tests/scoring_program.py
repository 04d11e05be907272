"""Run an environment's scoring program the way the host does, for tests: staged root-only by the host's own
staging, in a fresh process, one JSON result (docs/CONTRACT.md)."""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from rebench_inspect.runtime.layout import SandboxLayout
from rebench_inspect.runtime.scoring import stop_command, users_command
from rebench_inspect.runtime.staging import prepare_command, scoring_command, stage_tree
from rebench_inspect.spec.environment import EnvironmentSpec

RESULT_KEYS = {"valid", "raw", "message", "details"}


def stage_scoring_program(environment: EnvironmentSpec, protected: Path) -> Path:
    """Fresh copy of the staged tree in `<protected>/code` (mode 700, as in the sandbox); returns that folder."""
    code = protected / "code"
    shutil.rmtree(code, ignore_errors=True)
    stage_tree(environment, code)
    os.chmod(protected, 0o700)
    os.chmod(code, 0o700)
    return code


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
    code = stage_scoring_program(environment, protected)
    result = protected / "result.json"
    result.unlink(missing_ok=True)
    cmd, cwd = scoring_command(
        environment.at(scale),
        python=sys.executable,
        code_dir=code,
        workspace=workspace,
        protected=protected,
        result=result,
        run_as=run_as,
    )
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(env) if env else None)


def run_preparation(
    environment: EnvironmentSpec,
    workspace: Path,
    protected: Path,
    *,
    scale: str = "smoke",
    setup: bool = True,
    extra: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    timeout: float = 900,
) -> subprocess.CompletedProcess:
    """The preparation program staged and run as the host runs it (`extra`: more of its options, e.g. --no-cache)."""
    with tempfile.TemporaryDirectory(prefix="rebench-prepare-") as code:
        stage_tree(environment, Path(code))
        cmd, cwd = prepare_command(
            environment.at(scale),
            python=sys.executable,
            code_dir=code,
            workspace=workspace,
            protected=protected,
            setup=setup,
        )
        return subprocess.run(
            [*cmd, *extra], cwd=cwd, capture_output=True, text=True, timeout=timeout, env=dict(env) if env else None
        )


def scoring_result(environment: EnvironmentSpec, workspace: Path, protected: Path, **kwargs) -> dict:
    """Score and return the result; asserts that the scoring program itself ran (exit 0, one JSON object)."""
    completed = run_scoring_program(environment, workspace, protected, **kwargs)
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads((protected / "result.json").read_text())
    assert set(result) == RESULT_KEYS
    return result


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
