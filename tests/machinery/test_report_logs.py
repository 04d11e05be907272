"""`rebench report` on real Inspect logs of the toy environment: numbers traceable to the logs, plot files, CLI."""

import csv
import json
import math

from inspect_ai import eval
from inspect_ai.log import read_eval_log, write_eval_log

from rebench_inspect.cli import main
from rebench_inspect.runtime.task import build_task
from rebench_inspect.testing.scripted import tool_call
from rebench_inspect.tools.report import make_report

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_report_of_agent_and_human_runs(toy_environment, agent_script, tmp_path):
    logs = tmp_path / "logs"
    # two epochs of a scripted agent: reaches the reference (normalised 1) in epoch 1, does nothing useful in epoch 2
    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.1, epochs=2)
    # one sample at a time, so epoch 1 takes the first calls and submits, and epoch 2 submits at once
    model = agent_script(
        [tool_call("bash", command="echo 5 > answer.txt"), tool_call("score"), tool_call("submit", answer="done")]
    )
    [agent_log] = eval(task, model=model, display="none", log_dir=str(logs), max_samples=1)
    assert agent_log.status == "success"
    scores = sorted(sample.scores["rebench_scorer"].value["normalised"] for sample in agent_log.samples)
    assert scores == [0.0, 1.0]

    # the same log as if a human had made it with human_cli (a separate task in the eval set)
    human = read_eval_log(agent_log.location)
    human.eval.solver, human.eval.task_id = "human_cli", "human-runs"
    write_eval_log(human, str(logs / "human.eval"))

    out = tmp_path / "report"
    assert main(["report", str(logs), "--out", str(out), "--bootstrap", "200"]) == 0

    with open(out / "environments.csv") as handle:
        rows = {row["group"]: row for row in csv.DictReader(handle)}
    assert set(rows) == {"mockllm/model", "human"}
    agents = rows["mockllm/model"]
    assert int(agents["runs"]) == 2
    assert math.isclose(float(agents["mean_normalised"]), sum(scores) / 2)
    assert float(agents["ci95_low"]) == min(scores) and float(agents["ci95_high"]) == max(scores)
    # every figure names the log file, sample and epoch it came from
    assert sorted(agents["sources"].split()) == sorted(f"{agent_log.location}#toy@{epoch}" for epoch in (1, 2))
    assert all("human.eval#toy@" in source for source in rows["human"]["sources"].split())

    with open(out / "best_of_k.csv") as handle:
        best = [row for row in csv.DictReader(handle) if row["group"] == "mockllm/model"]
    assert [int(row["k"]) for row in best] == [1, 2]
    assert math.isclose(float(best[1]["estimate"]), max(scores) - (max(scores) - min(scores)) / 4)

    report = json.loads((out / "report.json").read_text())
    assert report["paper_human_reference"][0]["normalised"] == 0.64
    assert {run["ended_by"] for run in report["runs"]} == {"agent"}
    assert "## Best-of-k" in (out / "report.md").read_text()
    for plot in ("plots/toy.png", "plots/average.png"):
        assert plot in report["plots"]
        assert (out / plot).read_bytes().startswith(PNG_MAGIC)


def test_a_run_cut_short_by_an_error_is_left_out_with_a_warning(toy_environment, agent_script, tmp_path):
    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.1)
    # A scoring failure is the harness's only when its check on the starting workspace fails too: in the local
    # sandbox, no boundary, the agent can remove the copy the harness kept (issue 46), and the final run errors.
    breaks_the_harness = "rm -rf ../protected/start-workspace && echo crash > answer.txt"
    model = agent_script([tool_call("bash", command=breaks_the_harness)])
    [log] = eval(task, model=model, display="none", log_dir=str(tmp_path / "logs"))
    assert log.status == "error"
    report = make_report([log.location], tmp_path / "report", samples=50)
    assert report.rows == [] and report.cohorts == []
    assert any("cut short by an error" in warning for warning in report.warnings)


def test_a_final_scoring_that_fails_on_the_agents_files_is_invalid_and_counted(toy_environment, agent_script, tmp_path):
    """Issue 21: crashing the scorer with its files gives the agent an invalid final score, not an errored run."""
    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.1)
    model = agent_script([tool_call("bash", command="echo overflow > answer.txt")])
    [log] = eval(task, model=model, display="none", log_dir=str(tmp_path / "logs"))
    assert log.status == "success"
    [sample] = log.samples
    final = sample.scores["rebench_scorer"]
    assert final.value["normalised"] == 0.0
    last = final.metadata["score_log"][-1]
    assert last["label"] == "final" and last["valid"] is False
    assert last["details"]["scoring_failure"] is True
    report = make_report([log.location], tmp_path / "report", samples=50)
    [row] = report.rows
    assert row.runs == 1 and row.scoring_failures == 1
    assert any("final scoring failed on the agent's files" in warning for warning in report.warnings)
    # Nowhere in the log (score log, events, the scoring program's output) is the exception's text or a traceback,
    # which could quote what the agent's files held: the bug's type and the scorer's own lines only.
    written = read_eval_log(log.location).model_dump_json()
    assert "scoring program bug: OverflowError" in written
    assert "int too large" not in written and "Traceback (most recent call last)" not in written
