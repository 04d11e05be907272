"""Fuzz: every malformed answer.json ends in a verdict (issue 21), never a crash of the scoring program."""

from __future__ import annotations

import pytest

from rebench.scaling_law.task import ENVIRONMENT
from rebench_inspect.testing import programs
from tests import fuzz_inputs

VALID_ANSWER = {"n_embd": 256, "max_iters": 1000, "loss_prediction": 4.0}


@pytest.mark.parametrize(
    "variant", fuzz_inputs.params(fuzz_inputs.file_variants() + fuzz_inputs.json_variants(VALID_ANSWER))
)
def test_malformed_answer_gets_a_verdict(dirs, variant):
    workspace, protected = dirs
    variant.write(workspace / "answer.json")
    completed = programs.run_scoring_program(ENVIRONMENT, workspace, protected, timeout=60)
    fuzz_inputs.assert_verdict(completed, protected / "result.json")
