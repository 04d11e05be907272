"""Fixtures of the scaling_law tests: the prepared smoke environment (data, installed trainer, workspace) and
running the scoring program the way the host does."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from rebench.scaling_law.task import ENVIRONMENT
from rebench_inspect.testing import programs

TASK = Path(__file__).resolve().parents[2] / "tasks" / "scaling_law"


@pytest.fixture
def environment():
    return ENVIRONMENT


def score_answer(workspace: Path, protected: Path, answer: object | str, scale: str = "smoke") -> dict:
    """Write answer.json (a JSON value, or raw text) and run the scoring program on it."""
    text = answer if isinstance(answer, str) else json.dumps(answer)
    (workspace / "answer.json").write_text(text)
    return programs.scoring_result(ENVIRONMENT, workspace, protected, scale=scale)


@pytest.fixture(scope="session")
def prepared(tmp_path_factory) -> dict:
    """Smoke preparation run once: {"workspace", "protected", "trainer"}."""
    from rebench.scaling_law.sandbox import prepare

    root = tmp_path_factory.mktemp("scaling-law")
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
