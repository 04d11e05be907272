"""What goes into the sandbox: each environment's `sandbox/` and its declared libraries, wholesale, nothing else,
as a slice of the `rebench` package whose entry modules import from the staged tree alone."""

import asyncio
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
from inspect_ai.util import ExecResult
from pydantic import ValidationError

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.layout import SandboxLayout
from rebench_inspect.runtime.scoring import ScoringInfrastructureError, run_program_in, stage_files
from rebench_inspect.runtime.staging import sandbox_module, stage_tree, staged_tree, workspace_files
from rebench_inspect.spec.environment import SCALES, EnvironmentSpec

PACKAGE_ROOT = Path(str(files("rebench")))
NEVER_STAGED = ("agent", "reference", "tools")


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_staged_tree_is_the_sandbox_folder_and_the_libraries_only(name):
    environment = ENVIRONMENTS[name]
    staged = staged_tree(environment)
    homes = [environment.sandbox_dir, *(PACKAGE_ROOT / library for library in environment.sandbox_libraries)]
    package_files = {PACKAGE_ROOT / "__init__.py", environment.folder / "__init__.py"}
    for relative, source in staged.items():
        assert source in package_files or any(source.is_relative_to(home) for home in homes), (
            f"{name}: {relative} comes from {source}"
        )
        if source.is_relative_to(environment.folder):
            assert source.relative_to(environment.folder).parts[0] not in NEVER_STAGED, f"{name}: {relative}"
        assert source.suffix != ".md", f"{name}: {relative} is prose, not sandbox code"
    # wholesale: every file of sandbox/ is there, at its package path
    expected = {
        f"rebench/{name}/sandbox/{path.relative_to(environment.sandbox_dir).as_posix()}"
        for path in environment.sandbox_dir.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    assert expected <= set(staged)


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_staged_entry_modules_import_from_the_staged_tree_alone(name, tmp_path):
    """The staged package's `__init__`s and modules import nothing outside it: each entry module imports in a fresh
    interpreter started in the staged tree, as the host starts its programs, and comes from there."""
    environment = ENVIRONMENTS[name]
    code = stage_tree(environment, tmp_path / "code")
    sandbox = code / "rebench" / name / "sandbox"
    modules = [
        sandbox_module(environment, entry) for entry in ("score", "prepare") if (sandbox / f"{entry}.py").exists()
    ]
    probe = (
        "import importlib, os, sys\n"
        # An editable install's finder would supply whatever the staged tree lacks: the sandbox has none.
        "sys.meta_path[:] = [f for f in sys.meta_path if not f.__module__.startswith('__editable__')]\n"
        "assert all(importlib.import_module(m).__file__.startswith(os.getcwd()) for m in sys.argv[1:])"
    )
    completed = subprocess.run(
        [sys.executable, "-E", "-s", "-c", probe, *modules], cwd=code, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-2000:]


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_agent_copies_exist_at_both_scales(name):
    environment = ENVIRONMENTS[name]
    for scale in SCALES:
        for relative, source in workspace_files(environment.at(scale)).items():
            assert source.is_file(), f"{name} ({scale}): {relative} ← {source} is missing"


def test_an_agent_copy_from_outside_sandbox_or_agent_is_refused(toy_environment):
    fields = toy_environment.model_dump()
    with pytest.raises(ValidationError, match="sandbox/ or agent/"):
        EnvironmentSpec.model_validate({**fields, "agent_copies": {"answer.txt": "reference/answer.txt"}})
    accepted = EnvironmentSpec.model_validate({**fields, "agent_copies": {"copy.py": "sandbox/score.py"}})
    assert workspace_files(accepted.at("full"))["copy.py"] == toy_environment.sandbox_dir / "score.py"


class HostBox:
    """A sandbox that runs its commands on this host, recording them; `write_file` is not expected."""

    def __init__(self) -> None:
        self.commands: list[list[str]] = []

    async def exec(self, cmd, timeout=None, cwd=None, input=None, env=None):
        self.commands.append(cmd)
        environ = {**os.environ, **(env or {})}
        done = subprocess.run(cmd, input=input, cwd=cwd, env=environ, capture_output=True, timeout=timeout, check=False)
        return ExecResult(done.returncode == 0, done.returncode, done.stdout.decode(), done.stderr.decode())

    async def write_file(self, file, contents):
        raise AssertionError(f"a file written on its own: {file}")


def test_staging_a_tree_is_one_command_whatever_its_size(tmp_path):
    """A `write_file` per file costs two `docker exec`s in a container: a sample's setup and two scoring runs wrote
    about 250 files one by one (70 s of a 116 s Docker sample). One command also empties the folder first."""
    tree = staged_tree(ENVIRONMENTS["rust_codecontests"])
    destination = tmp_path / "protected" / "code"
    box = HostBox()
    asyncio.run(stage_files(tree, str(destination), box))
    assert len(box.commands) == 1 < len(tree)
    assert destination.stat().st_mode & 0o777 == 0o700  # root-only, as before
    for relative, source in tree.items():
        copy = destination / relative
        assert copy.read_bytes() == source.read_bytes(), relative
        assert copy.stat().st_mode & 0o777 == 0o644, relative
    # A second staging replaces the tree: nothing of the first survives.
    (destination / "left-over.py").write_text("")
    asyncio.run(stage_files(tree, str(destination), box))
    assert not (destination / "left-over.py").exists()


def test_a_scoring_run_is_three_commands(toy_environment, tmp_path, monkeypatch):
    """Stage the program, run it (the same command makes the results folder), read and remove its result: each
    `docker compose exec` costs about 0.2 s of CPU, and a sample's scoring runs are many."""
    box = HostBox()
    monkeypatch.setattr(SandboxLayout, "sandbox", lambda self: box)
    layout = SandboxLayout(
        workspace=str(tmp_path / "workspace"),
        protected=str(tmp_path / "protected"),
        python=sys.executable,
        agent_user=None,
        is_container=False,
    )
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "answer.txt").write_text("7")
    environment = toy_environment.at("smoke")
    result = asyncio.run(run_program_in(environment, layout, services=()))
    assert (result.valid, result.raw) == (True, 7.0)
    assert len(box.commands) == 3
    assert list((tmp_path / "protected" / "results").iterdir()) == []  # the result file is removed
    # A result file the program did not write is the harness's failure, said plainly.
    monkeypatch.setattr("rebench_inspect.runtime.scoring.scoring_command", lambda *args, **kwargs: (["true"], None))
    with pytest.raises(ScoringInfrastructureError, match="wrote no result file"):
        asyncio.run(run_program_in(environment, layout, services=()))
