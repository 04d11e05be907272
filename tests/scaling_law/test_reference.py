"""The reference solution: a real capped sweep and fit through the agent's launcher, scoring clearly above the
starting answer at smoke scale (its result is cached by the code it depends on, so reruns take seconds: the shared
fixture `reference_result`)."""

from __future__ import annotations

import json

import pytest

from rebench.scaling_law.task import ENVIRONMENT

from .conftest import TASK, score_answer

# Slow tier (`pytest -m slow`, run by CI): the reference sweep.
pytestmark = pytest.mark.slow


@pytest.fixture
def reference_answer(reference_result) -> dict:
    assert len(list((reference_result / "runs").glob("ref_*.json"))) >= 9  # it really ran a sweep
    return json.loads((reference_result / "answer.json").read_text())


def test_reference_scores_clearly_above_the_default(reference_answer, dirs):
    workspace, protected = dirs
    default = score_answer(workspace, protected, (workspace / "answer.json").read_text())
    reference = score_answer(workspace, protected, reference_answer)
    assert default["valid"] and reference["valid"], (default, reference)
    assert reference["raw"] > default["raw"] + 0.2
    assert reference["raw"] == pytest.approx(ENVIRONMENT.anchors["smoke"].reference, abs=0.1)


def test_reference_never_reads_the_ground_truth():
    for path in (TASK / "reference").iterdir():
        assert "ground_truth" not in path.read_text()
