"""Fuzz: a fixed_model.pth that is not a readable checkpoint file ends in a verdict (issue 21), never a crash.

The checkpoint loader (sandbox_lib.checkpoints) reads it as the agent's user in a process of its own; each run
starts two torch processes (seconds), so only the reproduced faults (a folder, a pipe) stay in the fast tier."""

from __future__ import annotations

import pytest
import torch

from rebench.fix_embedding.task import ENVIRONMENT
from rebench_inspect.testing import programs
from tests import fuzz_inputs

from .test_scoring import load_state


@pytest.mark.parametrize("variant", fuzz_inputs.params(fuzz_inputs.file_variants()))
def test_malformed_checkpoint_files_get_a_verdict(scoring_dirs, variant):
    workspace, protected = scoring_dirs
    variant.write(workspace / "fixed_model.pth")
    completed = programs.run_scoring_program(ENVIRONMENT, workspace, protected, timeout=300)
    assert not fuzz_inputs.assert_verdict(completed, protected / "result.json")["valid"]


@pytest.mark.fuzz
def test_weights_too_large_for_the_loss_get_a_verdict(scoring_dirs):
    """Finite weights whose activations overflow: a non-finite loss is an invalid score, not a crash."""
    workspace, protected = scoring_dirs
    state = load_state(workspace)
    for tensor in state["model"].values():
        tensor.fill_(3e38)
    torch.save(state, workspace / "fixed_model.pth")
    completed = programs.run_scoring_program(ENVIRONMENT, workspace, protected, timeout=300)
    fuzz_inputs.assert_verdict(completed, protected / "result.json")
