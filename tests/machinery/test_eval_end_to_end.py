"""End-to-end evals of the shared machinery on the local sandbox with a scripted agent and the toy environment."""

import math

from inspect_ai import eval
from inspect_ai.log import EvalLog

from rebench_inspect.runtime.scoring import HARNESS_FAILED_ITS_CHECK, SUBMISSION_BROKE_SCORING
from rebench_inspect.runtime.state import store_key
from rebench_inspect.runtime.task import build_task
from rebench_inspect.testing.scripted import tool_call


def run(environment, model, **task_args) -> EvalLog:
    task = build_task(environment.at("smoke"), sandbox="local", time_budget_hours=0.1, **task_args)
    [log] = eval(task, model=model, display="none", log_dir=None)
    return log


def final_score(log: EvalLog):
    [sample] = log.samples
    return sample.scores["rebench_scorer"]


def intermediate_events(log: EvalLog) -> list:
    [sample] = log.samples
    return [event for event in sample.events if event.event == "score" and event.intermediate]


def test_start_agent_and_final_entries_are_logged_and_best_counts(toy_environment, agent_script, tmp_path):
    model = agent_script(
        [
            tool_call("bash", command="echo 6 > answer.txt"),
            tool_call("score"),
            tool_call("bash", command="echo 9 > answer.txt"),
        ]
    )
    log = run(toy_environment, model)
    assert log.status == "success", log.error
    score = final_score(log)
    entries = score.metadata["score_log"]
    assert [entry["label"] for entry in entries] == ["start", "agent", "final"]
    assert [entry["raw"] for entry in entries] == [10.0, 6.0, 9.0]
    # best valid entry (6 s) counts, normalised on ln: (ln 6 − ln 10) / (ln 5 − ln 10)
    expected = (math.log(6) - math.log(10)) / (math.log(5) - math.log(10))
    assert math.isclose(score.value["normalised"], expected)
    assert math.isclose(score.value["transformed"], math.log(6))
    assert score.metadata["counted_entry"] == 1
    assert score.metadata["anchors"]["provenance"] == "toy"
    # the start and the agent's scoring run show up as intermediate scores in the transcript
    assert len(intermediate_events(log)) == 2
    assert log.results.scores[0].metrics["mean"].value == score.value["normalised"]


def test_score_tool_output_reaches_the_agent(toy_environment, agent_script):
    log = run(toy_environment, agent_script([tool_call("bash", command="echo 5 > answer.txt"), tool_call("score")]))
    [sample] = log.samples
    tool_results = [m.text for m in sample.messages if m.role == "tool"]
    assert any("normalised score=1.000" in text for text in tool_results)


def test_hidden_score_variant_reveals_validity_only(toy_environment, agent_script):
    log = run(
        toy_environment,
        agent_script([tool_call("bash", command="echo 5 > answer.txt"), tool_call("score"), tool_call("score_log")]),
        score_visible=False,
    )
    [sample] = log.samples
    tool_results = [m.text for m in sample.messages if m.role == "tool" and m.function in ("score", "score_log")]
    assert tool_results and all("valid" in text for text in tool_results)
    assert not any("normalised" in text or "raw=" in text for text in tool_results)
    # nor do the intermediate scores (what `task score` under human_cli prints), while the log keeps every value
    shown = [event.score for event in intermediate_events(log)]
    assert [score.value for score in shown] == [
        {"valid": True, "message": "ok"},
        {"valid": True, "message": "ok"},
    ]
    assert not any("raw=" in score.explanation or score.metadata for score in shown)
    assert [entry["raw"] for entry in sample.store[store_key("score_log")]] == [10.0, 5.0, 5.0]
    assert [entry["raw"] for entry in final_score(log).metadata["score_log"]] == [10.0, 5.0, 5.0]
    assert final_score(log).value["normalised"] == 1.0


def test_visible_intermediate_scores_carry_the_values(toy_environment, agent_script):
    log = run(toy_environment, agent_script([tool_call("bash", command="echo 5 > answer.txt"), tool_call("score")]))
    agent_entry = intermediate_events(log)[1].score
    assert agent_entry.value["raw"] == 5.0 and agent_entry.value["normalised"] == 1.0
    assert "normalised score=1.000" in agent_entry.explanation


def test_invalid_submissions_never_crash_the_eval_and_earlier_scores_are_kept(toy_environment, agent_script):
    model = agent_script(
        [
            tool_call("bash", command="echo 7 > answer.txt"),
            tool_call("score"),
            tool_call("bash", command="echo garbage > answer.txt"),
            tool_call("score"),
            tool_call("bash", command="rm -f answer.txt"),
        ]
    )
    log = run(toy_environment, model)
    assert log.status == "success"
    score = final_score(log)
    entries = score.metadata["score_log"]
    assert [entry["valid"] for entry in entries] == [True, True, False, False]
    assert "does not hold a number" in entries[2]["message"]
    assert "missing" in entries[3]["message"]
    assert score.metadata["raw"] == 7.0


def test_a_failing_intermediate_score_call_leaves_the_sample_running_and_the_next_call_working(
    toy_environment, agent_script
):
    # 'crash' makes the toy's scoring program fail as the machine would (exit 2): after the agent has acted, the
    # harness scores the starting workspace to check itself, passes, and the failure is the submission's verdict.
    model = agent_script(
        [
            tool_call("bash", command="echo crash > answer.txt"),
            tool_call("score"),
            tool_call("bash", command="echo 7 > answer.txt"),
            tool_call("score"),
            tool_call("bash", command="echo crash > answer.txt"),
        ]
    )
    log = run(toy_environment, model)
    assert log.status == "success", log.error
    entries = final_score(log).metadata["score_log"]
    assert [(entry["label"], entry["valid"]) for entry in entries] == [
        ("start", True),
        ("agent", False),
        ("agent", True),
        ("final", False),
    ]
    for failed in (entries[1], entries[3]):
        assert failed["message"] == SUBMISSION_BROKE_SCORING
        assert failed["details"] == {
            "scoring_failure": True,
            "harness_check": "passed",
            "failed_step": "ScoringInfrastructureError",
        }
    assert final_score(log).metadata["raw"] == 7.0
    [sample] = log.samples
    told = [m.text for m in sample.messages if m.role == "tool" and m.function == "score"]
    assert "INVALID" in told[0] and "normalised score" in told[1]


def test_a_harness_that_fails_its_own_check_flags_the_entry_and_errors_only_the_final_run(
    toy_environment, agent_script
):
    # The local sandbox is no boundary: the agent can remove the starting workspace the harness kept, so the harness's
    # check fails too. An intermediate run is then an entry flagged for the operator; the final run errors the sample.
    model = agent_script(
        [
            tool_call("bash", command="rm -rf ../protected/start-workspace && echo crash > answer.txt"),
            tool_call("score"),
        ]
    )
    log = run(toy_environment, model)
    assert log.status == "error"
    [sample] = log.samples
    assert "the harness's own check on the starting workspace" in sample.error.message
    told = [m.text for m in sample.messages if m.role == "tool" and m.function == "score"]
    assert HARNESS_FAILED_ITS_CHECK in told[0]


def test_services_run_beside_the_agent_and_each_scoring_run(toy_environment, agent_script):
    from contextlib import asynccontextmanager

    import anyio

    from rebench_inspect.runtime.task import build_task

    events: list[str] = []

    @asynccontextmanager
    async def recording_service(layout, purpose):
        # a cancel scope, like a bridge's task group: it must be exited in the task that entered it
        with anyio.CancelScope():
            events.append(f"open {purpose}")
            yield {"TOY_SERVICE_URL": "http://localhost:1"}
            events.append(f"close {purpose}")

    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.1, services=[recording_service])
    [log] = eval(task, model=agent_script([tool_call("score")]), display="none", log_dir=None)
    assert log.status == "success", log.error
    # agent run (1) + start, agent and final scoring runs (3), each opened and closed
    assert events.count("open agent") == 1 and events.count("close agent") == 1
    assert events.count("open scoring") == 3 and events.count("close scoring") == 3


def test_model_none_scores_the_starting_solution_without_an_agent(toy_environment):
    log = run(toy_environment, "none")
    assert log.status == "success", log.error
    score = final_score(log)
    assert [entry["label"] for entry in score.metadata["score_log"]] == ["start", "final"]
    assert score.value["normalised"] == 0.0 and score.metadata["raw"] == 10.0
