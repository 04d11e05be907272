"""End-to-end evals of finetune_target on the local sandbox: scripted mockllm agent, judge role through the proxy."""

import sys

import pytest
from inspect_ai.model import get_model

from rebench.finetune_target.smoke_judge import smoke_judge_custom_outputs
from rebench.finetune_target.task import ENVIRONMENT
from rebench.maintenance import reference_solution
from rebench_inspect.runtime.reference import SANDBOX_CHECK_TOLERANCE
from rebench_inspect.testing.scripted import scripted_agent, tool_call

# Slow tier (`pytest -m slow`, run by CI): end-to-end evals (smoke assets, judge proxy, scoring runs).
pytestmark = pytest.mark.slow

PY = sys.executable


def mock_judge():
    return get_model("mockllm/model", custom_outputs=smoke_judge_custom_outputs)


def tool_outputs(log) -> list[str]:
    [sample] = log.samples
    return [m.text for m in sample.messages if m.role == "tool"]


def judge_events(log) -> list:
    [sample] = log.samples
    return [e for e in sample.events if e.event == "model" and e.role == "judge"]


def test_agent_uses_the_judge_through_the_proxy_until_its_budget_is_spent_and_scoring_still_works(
    smoke_assets, environment, smoke_eval
):
    # One eval for both (each eval costs a setup and a final scoring run): 4 calls within the budget of 5, then 5 more
    # asked, of which the budget grants 1.
    agent = scripted_agent([
        tool_call("bash", command=f"{PY} evaluation.py --prompts 4"),
        tool_call("bash", command=f"{PY} evaluation.py --prompts 5 2>&1 | tail -3"),
        tool_call("score"),
    ])
    log = smoke_eval(environment, agent, model_roles={"judge": mock_judge()}, judge_calls=5)
    assert log.status == "success", log.error
    within, beyond = tool_outputs(log)[:2]
    assert '"win_rate"' in within and '"judge_calls": 4' in within, within
    assert "judge call budget is exhausted" in beyond and "5 judge calls" in beyond, beyond
    [sample] = log.samples
    ledger = sample.store["rebench:model_proxy:judge"]
    assert ledger["agent"]["requests"] == 5 and ledger["agent"]["refused"] >= 1
    assert ledger["scoring"]["calls"] == 3 * 64
    entries = sample.scores["rebench_scorer"].metadata["score_log"]
    assert [e["label"] for e in entries] == ["start", "agent", "final"]
    assert all(e["valid"] for e in entries)
    assert entries[0]["raw"] == pytest.approx(ENVIRONMENT.anchors["smoke"].start)
    assert entries[0]["details"]["judge_calls"] == 64  # 32 held-out prompts × 2 comparison models
    # every judge call made (the agent's 5 granted + 3 scoring runs × 64) is a model event of role judge
    assert len(judge_events(log)) == 5 + 3 * 64
    assert log.stats.role_usage["judge"].input_tokens > 0


def test_reference_solution_beats_the_start_and_rescoring_reports_both_sets(smoke_assets, environment, smoke_eval):
    # The reference trains in the sandbox here, its judge reached through the proxy (the maintenance solver).
    log = smoke_eval(environment, solver=reference_solution(), rescore_best=True)
    assert log.status == "success", log.error
    [sample] = log.samples
    final = sample.scores["rebench_scorer"]
    entries = final.metadata["score_log"]
    assert entries[0]["raw"] == pytest.approx(ENVIRONMENT.anchors["smoke"].start)
    # The reference's training differs between CPUs (README, anchors): the sandbox check's tolerance, not equality.
    assert abs(final.value["normalised"] - 1.0) <= SANDBOX_CHECK_TOLERANCE
    rescored = sample.scores["finetune_target_rescore"]
    assert rescored.value["selected"] == pytest.approx(max(e["raw"] for e in entries if e["valid"]))
    assert 0.0 <= rescored.value["rescored"] <= 1.0
    assert rescored.metadata["rescored"]["details"]["second_heldout_set"] is True
    # the default smoke judge is the offline provider, reached through the proxy
    assert sample.store["rebench:model_proxy:judge"]["agent"]["calls"] > 100
