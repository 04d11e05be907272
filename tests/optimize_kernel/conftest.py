"""Helpers to run the optimize_kernel scoring program the way the host does (see docs/CONTRACT.md).

Staging and running use the host's own staging (tests/scoring_program.py).
"""

import subprocess
from pathlib import Path

import pytest

from rebench.optimize_kernel.task import ENVIRONMENT
from rebench_inspect.testing import programs

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "optimize_kernel"
START_SOLUTION = TASK / "agent" / "workspace" / "solution.py"
REFERENCE_SOLUTION = TASK / "reference" / "solution.py"


@pytest.fixture
def environment():
    return ENVIRONMENT


def stage_scoring_program(protected: Path) -> Path:
    return programs.stage_scoring_program(ENVIRONMENT, protected)


def run_scoring(workspace: Path, protected: Path, **kwargs) -> subprocess.CompletedProcess:
    """Run score.py as the host would (result file: `protected/result.json`)."""
    return programs.run_scoring_program(ENVIRONMENT, workspace, protected, **kwargs)


def score_workspace(workspace: Path, protected: Path, **kwargs) -> dict:
    """Score `workspace`; assert the scoring program itself ran (exit 0, one JSON object) and return the result."""
    return programs.scoring_result(ENVIRONMENT, workspace, protected, **kwargs)


def make_workspace(root: Path, solution: str | None) -> Path:
    workspace = root / "workspace"
    workspace.mkdir(parents=True)
    if solution is not None:
        (workspace / "solution.py").write_text(solution)
    return workspace


@pytest.fixture
def kernel_paths() -> dict[str, Path]:
    return {"start": START_SOLUTION, "reference": REFERENCE_SOLUTION, "task": TASK}
