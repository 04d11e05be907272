"""Fixtures of the fix_embedding tests: the environment the shared fixtures prepare, score and run
(rebench_inspect/testing/fixtures.py)."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from rebench.fix_embedding.task import ENVIRONMENT
from rebench_inspect.testing.programs import scoring_result

TASKS = Path(__file__).resolve().parents[2] / "tasks"

# score.py run as the host would; asserts it ran (exit 0, one JSON object) and returns the result.
score_workspace = partial(scoring_result, ENVIRONMENT)


@pytest.fixture
def environment():
    return ENVIRONMENT

