"""Fixtures of the scaling_law tests: the prepared smoke environment (data, installed trainer, workspace) and
running the scoring program the way the host does."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

import pytest

from rebench.scaling_law.task import ENVIRONMENT
from rebench_inspect.staging import stage_tree
from tests import scoring_program as shared

TASK = Path(__file__).resolve().parents[2] / "tasks" / "scaling_law"


def score_answer(workspace: Path, protected: Path, answer: object | str, scale: str = "smoke") -> dict:
    """Write answer.json (a JSON value, or raw text) and run the scoring program on it."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    (workspace / "answer.json").write_text(text)
    return shared.scoring_result(ENVIRONMENT, workspace, protected, scale=scale)


def load_staged(module: str, staged: Path):
    """Import a module of the staged prepare/scoring folder (as the sandbox does, its folder on sys.path)."""
    sys.path.insert(0, str(staged))
    try:
        spec = importlib.util.spec_from_file_location(f"scaling_law_{module}", staged / f"{module}.py")
        loaded = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(loaded)
        return loaded
    finally:
        sys.path.remove(str(staged))


@pytest.fixture(scope="session")
def prepared(tmp_path_factory) -> dict:
    """Smoke preparation run once, as the host stages it: {"workspace", "protected", "trainer"}."""
    root = tmp_path_factory.mktemp("scaling-law")
    staged = stage_tree(ENVIRONMENT, root / "staged")
    prepare = load_staged("prepare", staged)
    trainer = prepare.prepare("smoke", root / "workspace", root / "protected")
    return {
        "workspace": root / "workspace",
        "protected": root / "protected",
        "trainer": trainer,
        "root": root,
    }


@pytest.fixture
def dirs(prepared, tmp_path) -> tuple[Path, Path]:
    """A fresh copy of the prepared workspace and an empty protected folder."""
    workspace = tmp_path / "workspace"
    shutil.copytree(prepared["workspace"], workspace, symlinks=True)
    protected = tmp_path / "protected"
    protected.mkdir()
    return workspace, protected
