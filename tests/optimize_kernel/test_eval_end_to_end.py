"""The agent path end to end at smoke scale on the local sandbox: a scripted agent working in its current directory
puts the reference kernel in place, scores it, reads its score log and time left, and submits."""

import pytest
from inspect_ai import eval

from rebench.optimize_kernel.task import optimize_kernel
from tests.conftest import scripted_agent, tool_call
from tests.optimize_kernel.conftest import REFERENCE_SOLUTION

# Slow tier (`pytest -m slow`, run by CI): end-to-end evals (setup, agent, scoring runs).
pytestmark = pytest.mark.slow


def test_scripted_agent_scores_the_reference_kernel_written_in_its_cwd():
    model = scripted_agent(
        [
            tool_call("bash", command="ls"),
            tool_call("bash", command=f"cp {REFERENCE_SOLUTION} solution.py"),
            tool_call("score"),
            tool_call("score_log"),
        ]
    )
    task = optimize_kernel(scale="smoke", sandbox="local", agent_user=None, time_budget_hours=0.5)
    [log] = eval(task, model=model, display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    listing, _, scored, score_log = [m.text for m in sample.messages if m.role == "tool"][:4]
    assert listing.split() == ["solution.py"]
    assert "valid" in scored and "INVALID" not in scored and "Working time used" in scored
    assert score_log.splitlines()[-1].endswith(" left.")
    entries = sample.scores["rebench_scorer"].metadata["score_log"]
    assert [entry["label"] for entry in entries] == ["start", "agent", "final"]
    assert all(entry["valid"] for entry in entries)
    # the reference is much faster than the start even in the CPU interpreter
    assert entries[1]["normalised"] > 0.5

