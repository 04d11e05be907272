"""`rebench score`, `rebench preflight` and what `rebench demo` says, outside any eval."""

import json
import math
import shutil
from pathlib import Path

import pytest

from rebench_inspect import cli
from rebench_inspect.runtime.workspace_score import score_workspace


def test_score_workspace_runs_the_same_program_and_normalises(toy_environment, tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "answer.txt").write_text("5")
    result = score_workspace(toy_environment.at("smoke"), tmp_path / "ws")
    assert result["valid"] and result["raw"] == 5.0
    assert math.isclose(result["transformed"], math.log(5)) and math.isclose(result["normalised"], 1.0)
    assert result["anchors"]["provenance"] == "toy"


def test_score_workspace_reports_invalid_submissions_without_failing(toy_environment, tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ws").mkdir()
    result = score_workspace(toy_environment.at("smoke"), tmp_path / "ws")
    assert result["valid"] is False and result["normalised"] is None and "missing" in result["message"]


def test_score_workspace_raises_when_the_scoring_program_breaks(toy_environment, tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "answer.txt").write_text("crash")
    with pytest.raises(RuntimeError, match="scoring program failed"):
        score_workspace(toy_environment.at("smoke"), tmp_path / "ws")


def test_score_command_prints_json_and_exits_zero_for_invalid(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    assert cli.main(["score", "optimize_kernel", str(tmp_path / "empty"), "--scale", "smoke"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["valid"] is False and printed["environment"] == "optimize_kernel"


def test_preflight_exits_nonzero_and_names_the_problem(monkeypatch, capsys):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    assert cli.main(["preflight", "optimize_kernel"]) == 1
    assert "no Docker engine is reachable" in capsys.readouterr().out


@pytest.mark.slow  # a whole sandbox-check eval of optimize_kernel
def test_demo_runs_an_environment_offline_and_leaves_logs(tmp_path, capsys):
    from inspect_ai.log import list_eval_logs, read_eval_log

    exit_status = cli.main(["demo", "optimize_kernel", "--quiet", "--log-dir", str(tmp_path)])
    table = capsys.readouterr().out
    rows = [line.split() for line in table.splitlines() if line.startswith("optimize_kernel")]
    assert [(row[1], row[2], row[4]) for row in rows] == [("starting", "valid", "ms"), ("reference", "valid", "ms")]
    # CPU timings swing with machine load: the table is checked against the log it summarises, not against anchors
    [log_info] = list_eval_logs(str(tmp_path))
    log = read_eval_log(log_info)
    # one sample: the score log's first entry scored the starting solution, its last the reference
    [sample] = log.samples
    score_log = sample.scores["rebench_scorer"].metadata["score_log"]
    logged = {"starting": score_log[0], "reference": score_log[-1]}
    assert {row[1]: float(row[5]) for row in rows} == pytest.approx(
        {solution: round(entry["normalised_unclipped"], 3) for solution, entry in logged.items()}
    )
    check = sample.scores["anchors_reproduced"]
    assert {row[1]: row[6] for row in rows} == {
        solution: "PASS" if check.metadata[solution]["passed"] else "FAIL" for solution in logged
    }
    assert exit_status == (0 if check.value == "C" else 1)


@pytest.mark.slow  # another demo eval
def test_demo_says_what_runs_and_warns_about_a_cold_first_preparation(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "empty-cache"))
    cli.main(["demo", "optimize_kernel", "--log-dir", str(tmp_path / "logs")])  # its verdict: the test above
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("First run: preparing the smoke models and data takes about")
    assert lines[1].startswith("[1/1] optimize_kernel: preparing")
    # while it runs: a line as its one sample starts, per note of its transcript, and as it ends
    assert "    optimize_kernel: started" in lines
    assert "    optimize_kernel: Scoring the starting solution (the score log's first entry)…" in lines
    assert any(line.startswith("    optimize_kernel: scored after ") for line in lines)
    assert [line for line in lines if line.startswith("[1/1]")][-1].startswith("[1/1] optimize_kernel: success in ")


def with_local_check(environment, folder: Path, exit_code: int):
    """The environment with a `local_check` script that prints a message and exits with `exit_code`."""
    shutil.copytree(environment.folder, folder)
    message = "needs the widget stack: run install_widgets.sh"
    (folder / "check.py").write_text(f"import sys\nprint({message!r})\nsys.exit({exit_code})\n")
    return environment.model_copy(update={"location": folder, "local_check": "check.py"})


def test_local_problems_are_what_the_environments_check_says(toy_environment, tmp_path):
    from rebench_inspect.runtime.sandbox import local_problems

    assert local_problems(toy_environment) == []  # no check: nothing beyond the package is needed
    assert local_problems(with_local_check(toy_environment, tmp_path / "ok", 0)) == []
    missing = with_local_check(toy_environment, tmp_path / "missing", 1)
    assert local_problems(missing) == ["needs the widget stack: run install_widgets.sh"]


def test_preflight_and_demo_say_what_a_local_run_lacks(toy_environment, tmp_path, monkeypatch, capsys):
    from rebench.environments import ENVIRONMENTS

    monkeypatch.setitem(ENVIRONMENTS, "toy", with_local_check(toy_environment, tmp_path / "toy", 1))
    monkeypatch.setattr(cli.arguments, "environment_names", lambda: sorted(ENVIRONMENTS))
    assert cli.main(["preflight", "toy", "--sandbox", "local"]) == 1
    assert "- needs the widget stack: run install_widgets.sh" in capsys.readouterr().out
    # The demo does not run it, says why in its progress, its table and after it; asked for by name, that fails.
    assert cli.main(["demo", "toy", "--log-dir", str(tmp_path / "logs")]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert "[1/1] toy: not run: needs the widget stack: run install_widgets.sh" in lines
    assert ["toy", "-", "not", "run", "-", "-", "-"] in [line.split() for line in lines]
    assert "toy was not run: needs the widget stack: run install_widgets.sh" in lines


@pytest.mark.parametrize(
    "scale, anchors", [("smoke", "the built-in smoke anchors (CPU-measured)"), ("full", "the paper's anchors")]
)
def test_calibrate_says_which_anchors_it_compares_with(scale, anchors, tmp_path, monkeypatch, capsys):
    from rebench_inspect.tools import calibrate

    document = {"measured": {}, "normalised_on_built_in_anchors": {"start": 0.01, "reference": 0.98}}
    monkeypatch.setattr(calibrate, "run_calibration", lambda *args: {**document, "replaces_built_in_anchors": False})
    assert cli.main(["calibrate", "fix_embedding", "--scale", scale, "--out", str(tmp_path / "anchors.json")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"on {anchors}: start → 0.010, reference → 0.980"
    assert printed[1].startswith(f"fix_embedding is not timed: {anchors} stay in use")


def test_calibrate_says_when_the_start_depends_on_the_hosts_cpus(tmp_path, monkeypatch, capsys):
    """Issue 27: optimize_llm_foundry's starting script tokenises with one worker per logical CPU of the host."""
    from rebench_inspect.tools import calibrate

    document = {
        "measured": {},
        "normalised_on_built_in_anchors": {"start": 0.01, "reference": 0.98},
        "replaces_built_in_anchors": True,
        "hardware": calibrate.parse_probe("cpus=52\nlogical_cpus=96\nmachine=x86_64"),
    }
    monkeypatch.setattr(calibrate, "run_calibration", lambda *args: document)
    assert cli.main(["calibrate", "optimize_llm_foundry", "--out", str(tmp_path / "anchors.json")]) == 0
    printed = capsys.readouterr().out
    assert "one worker per logical CPU of the host (96 here" in printed and "METR's machine had 128" in printed
    assert "logical_cpus=$(getconf _NPROCESSORS_ONLN)" in calibrate.HARDWARE_PROBE
