"""Inspect end to end on the local sandbox at smoke scale (with the LLM Foundry stack): setup prepares the model and
data, the starting solution is the score log's first entry, a mockllm agent puts the reference solution in place and
scores it, and the final score is the better (faster) of the two."""

from __future__ import annotations

import pytest
from inspect_ai import eval
from inspect_ai.model import get_model

from rebench.optimize_llm_foundry.task import ENVIRONMENT, optimize_llm_foundry
from rebench_inspect.runtime.sandbox import local_problems
from tests.conftest import tool_call


@pytest.mark.slow
def test_start_then_reference_with_mockllm_agent():
    missing = local_problems(ENVIRONMENT)
    if missing:
        pytest.skip("; ".join(missing))
    reference = ENVIRONMENT.reference_dir / "solution"
    agent = get_model(
        "mockllm/model",
        custom_outputs=[
            tool_call("bash", command=f"cp -r {reference}/. solution/"),  # tools start in the workspace
            tool_call("score"),
            tool_call("submit", answer="done"),
        ],
    )
    task = optimize_llm_foundry(scale="smoke", sandbox="local", agent_user=None, time_budget_hours=0.5)
    [log] = eval(task, model=agent, display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    score = sample.scores["rebench_scorer"]
    entries = score.metadata["score_log"]
    assert len(entries) >= 2 and all(entry["valid"] for entry in entries), entries
    start, reference_entry = entries[0], entries[1]
    assert reference_entry["raw"] < start["raw"], (reference_entry["raw"], start["raw"])
    assert score.value["normalised"] > 0.5, score.value
