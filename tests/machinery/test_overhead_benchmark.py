"""benchmarks/overhead.py reads each scoring program run from the log `rebench score --log-dir` keeps, and from an
eval's log each `score` tool call's."""

import pytest
from inspect_ai.log import list_eval_logs, read_eval_log

from benchmarks.overhead import (
    CLI_COLUMNS,
    TOOL_COLUMNS,
    Call,
    ToolCall,
    cli_cells,
    program_runs,
    score_tool_calls,
    table,
    tool_cells,
)
from rebench_inspect.runtime.task import build_task
from rebench_inspect.runtime.workspace_score import score_workspace


def test_the_kept_score_log_times_the_scoring_program_apart_from_the_harness(toy_environment, tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "answer.txt").write_text("5")
    result = score_workspace(toy_environment.at("smoke"), tmp_path / "ws", log_dir=str(tmp_path / "logs"))
    assert result["valid"] and result["raw"] == 5.0
    [info] = list_eval_logs(str(tmp_path / "logs"))
    runs, harness_commands = program_runs(read_eval_log(info), toy_environment)
    # the toy's scoring program ran once (no measured anchors), and the harness ran commands of its own around it
    assert len(runs) == 1 and 0 < runs[0] < 30, runs
    assert harness_commands > 0
    call = Call(wall_s=runs[0] + 2.0, program_runs=runs, before_eval_s=1.0, harness_commands_s=harness_commands)
    assert call.overhead_s == pytest.approx(2.0)


def test_each_score_tool_call_of_an_eval_is_timed_with_its_own_scoring_program_run(
    toy_environment, tmp_path, monkeypatch
):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    task = build_task(toy_environment.at("smoke"), sandbox="local", time_budget_hours=0.1)
    calls = score_tool_calls(toy_environment, task, 3, str(tmp_path / "logs"))
    assert len(calls) == 3
    for call in calls:
        # the scoring program at setup (the start's score) is not counted in any call: one run each
        assert len(call.program_runs) == 1 and 0 < call.program_runs[0] < call.wall_s, call
        assert 0 < call.overhead_s < call.wall_s and call.harness_commands_s > 0, call


def test_a_tool_call_whose_program_event_the_log_lacks_is_left_out_and_counted():
    calls = [ToolCall(19.1, [], 0.8), ToolCall(19.3, [18.0], 0.8), ToolCall(2.5, [2.0], 0.1)]
    header, rule, missing, timed = table(TOOL_COLUMNS, {"lost": [calls[0]], "timed": calls}, tool_cells)
    assert header.count("|") == rule.count("|") == missing.count("|") == timed.count("|")
    assert "| lost | 0 of 1 timed |" in missing
    # overheads 1.3 and 0.5: the median is 0.90, the call without its program run is not counted as overhead
    assert "| timed | 2 of 3 |" in timed and "**0.90 (0.50–1.30)**" in timed and timed.endswith("| yes |")


def test_a_command_line_call_whose_program_event_the_log_lacks_is_left_out_and_counted():
    """The benchmark stopped at such a call (finetune_target's first, 2026-12-07); now its table says how many."""
    lost = Call(wall_s=30.0, program_runs=[], before_eval_s=2.0, harness_commands_s=1.0)
    calls = [lost, Call(12.0, [10.0], 2.0, 0.5), Call(13.0, [10.0], 2.0, 0.5)]
    header, rule, missing, timed = table(CLI_COLUMNS, {"lost": (lost, [lost]), "timed": (lost, calls)}, cli_cells)
    assert header.count("|") == rule.count("|") == missing.count("|") == timed.count("|")
    assert "| lost | 30.0 | 0 of 1 timed |" in missing
    # overheads 2.0 and 3.0 (the lost call's 30 s are not counted): the median is 2.50
    assert "| timed | 30.0 | 2 of 3 |" in timed and "**2.50 (2.00–3.00)**" in timed and timed.endswith("| no |")
