"""`rebench demo` tells the truth: a verdict per solution with its reason, units, and a failing exit status."""

import os
import shutil

import pytest

from rebench_inspect import cli
from rebench_inspect.runtime.task import build_task
from rebench_inspect.spec.environment import Anchors


@pytest.fixture
def toys(toy_environment, tmp_path, monkeypatch):
    """`toy` (start 10 s → 0, reference 5 s → 1); `toy_off`, the same with a reference anchor of 2 s: its reference
    solution lands at ln(10/5)/ln(10/2) = 0.431, outside 1 ± 0.25; `toy_start_off`, with a start anchor of 14 s: its
    starting solution lands at ln(14/10)/ln(14/5) = 0.327, outside 0 ± 0.25; `toy_broken`, whose reference
    solution's solve.sh fails; `toy_timed`, the toy measuring its smoke anchors at setup (2 runs each)."""
    from rebench.environments import ENVIRONMENTS, TASKS

    toy = toy_environment.model_copy(update={"raw_unit": "s"})

    def anchored(name: str, start: float, reference: float):
        anchors = Anchors(start=start, reference=reference, provenance="off on purpose")
        return toy.model_copy(update={"name": name, "anchors": {"smoke": anchors, "full": anchors}})

    broken = shutil.copytree(toy.folder, tmp_path / "toy_broken")
    (broken / "reference" / "solve.sh").write_text("echo 'the reference is broken' >&2\nexit 3\n")
    toy_broken = toy.model_copy(update={"name": "toy_broken", "location": broken})
    toy_timed = toy.model_copy(update={"name": "toy_timed", "smoke_anchor_runs": 2})
    toys = (toy, anchored("toy_off", 10.0, 2.0), anchored("toy_start_off", 14.0, 5.0), toy_broken, toy_timed)
    for environment in toys:
        monkeypatch.setitem(ENVIRONMENTS, environment.name, environment)
        monkeypatch.setitem(
            TASKS,
            environment.name,
            lambda spec=environment, scale="full", anchors=None, **kwargs: build_task(
                spec.at(scale, anchors), **kwargs
            ),
        )
    monkeypatch.setattr(cli.arguments, "environment_names", lambda: sorted(ENVIRONMENTS))


def test_demo_fails_an_environment_whose_reference_misses_its_anchor(toys, tmp_path, capsys):
    assert cli.main(["demo", "toy", "toy_off", "--quiet", "--log-dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.startswith("environment"))
    assert header.split() == ["environment", "solution", "status", "raw", "normalised", "verdict"]
    rows = [line.split() for line in lines if line.startswith("toy")]
    assert rows == [
        ["toy", "starting", "valid", "10", "s", "0.000", "PASS"],
        ["toy", "reference", "valid", "5", "s", "1.000", "PASS"],
        ["toy_off", "starting", "valid", "10", "s", "0.000", "PASS"],
        ["toy_off", "reference", "valid", "5", "s", "0.431", "FAIL"],
    ]
    assert "PASS: within ±0.25 of that (starting 0, reference 1)." in " ".join(lines)
    assert "FAIL toy_off reference: normalised 0.431, expected 1 ± 0.25 (a timed environment" in "\n".join(lines)


def test_demo_passes_when_every_environment_reproduces_its_anchors(toys, tmp_path, capsys):
    assert cli.main(["demo", "toy", "--quiet", "--log-dir", str(tmp_path)]) == 0
    assert "FAIL" not in capsys.readouterr().out


def test_demo_says_what_each_sample_does_and_titles_its_logs_by_environment(toys, tmp_path, capsys):
    from inspect_ai.log import list_eval_logs, read_eval_log

    assert cli.main(["demo", "toy", "--log-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    # a line when its one sample starts, one per note of its transcript, one when it is scored
    assert "    toy: started" in lines
    assert "    toy: Scoring the starting solution (the score log's first entry)…" in lines
    assert any(line.startswith("    toy: scored after ") for line in lines)
    [log] = [read_eval_log(info) for info in list_eval_logs(str(tmp_path))]
    assert log.eval.task == "rebench/sandbox_check/toy"


def test_report_on_the_demos_logs_says_in_one_line_what_it_needs(toys, tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "report"
    assert cli.main(["demo", "toy", "--quiet", "--log-dir", str(logs)]) == 0
    capsys.readouterr()
    assert cli.main(["report", str(logs), "--out", str(out)]) == 1
    printed, err = capsys.readouterr()
    assert printed == "" and len(err.splitlines()) == 1
    assert err.startswith(f"rebench report: {logs} holds only sandbox-check logs (1, as `rebench demo`")
    assert "a report needs the logs of agent runs (`inspect eval rebench/ENV --model MODEL" in err
    assert not out.exists()


def test_an_errored_row_gives_the_exceptions_text():
    from rebench_inspect.cli.demo import error_sentence

    assert error_sentence("ScoringInfrastructureError('measuring the smoke anchors: it failed')") == (
        "measuring the smoke anchors: it failed"
    )
    assert error_sentence('RuntimeError("it\'s gone")') == "it's gone"
    assert error_sentence("plain words") == "plain words"


def test_demo_fails_the_starting_row_when_the_start_misses_its_anchor(toys, tmp_path, capsys):
    # one sample: its setup scored the start (the first row), the final pass the reference (the second)
    assert cli.main(["demo", "toy_start_off", "--quiet", "--log-dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines if line.startswith("toy")] == [
        ["toy_start_off", "starting", "valid", "10", "s", "0.327", "FAIL"],
        ["toy_start_off", "reference", "valid", "5", "s", "1.000", "PASS"],
    ]
    failures = [line for line in lines if line.startswith("FAIL ")]
    assert failures == [
        "FAIL toy_start_off starting: normalised 0.327, expected 0 ± 0.25 (a timed environment: single runs vary "
        "with the machine's load; rerun it)"
    ]


def test_a_failed_sample_is_one_row_with_its_errors_text(toys, tmp_path, capsys):
    assert cli.main(["demo", "toy_broken", "--quiet", "--log-dir", str(tmp_path)]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines if line.startswith("toy")] == [
        ["toy_broken", "-", "error", "-", "-", "FAIL"]  # no raw value, no normalised one
    ]
    [failure] = [line for line in lines if line.startswith("FAIL ")]
    assert failure.startswith("FAIL toy_broken -: reference solution failed (exit 3): the reference is broken")


def test_a_timed_environments_anchors_from_a_passing_demo_are_reused_while_the_load_is_the_same(
    toys, tmp_path, monkeypatch, capsys
):
    from inspect_ai.log import list_eval_logs, read_eval_log

    from rebench_inspect.runtime.measured_anchors import MEASURED_AT_SETUP

    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "getloadavg", lambda: (0.3, 0.3, 0.3))
    runs = iter(range(10))

    def demo(*options: str) -> tuple[str, str]:
        """What the demo said about the anchors, and the provenance of those its sample scored with."""
        logs = tmp_path / f"logs-{next(runs)}"
        assert cli.main(["demo", "toy_timed", "--log-dir", str(logs), *options]) == 0
        [said] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("[1/1] toy_timed: ") and "anchors" in line]
        [log] = [read_eval_log(info) for info in list_eval_logs(str(logs))]
        return said, log.samples[0].scores["rebench_scorer"].metadata["anchors"]["provenance"]

    said, provenance = demo()
    assert said == "[1/1] toy_timed: measuring its smoke anchors (no earlier demo measured them)"
    assert provenance.startswith(MEASURED_AT_SETUP)
    said, provenance = demo()
    assert said.startswith("[1/1] toy_timed: reusing the smoke anchors the demo of ")
    assert said.endswith(" measured (load average 0.3, now 0.3)")
    assert provenance.startswith("calibration file ") and "demo-anchors.json" in provenance
    said, provenance = demo("--fresh")
    assert said == "[1/1] toy_timed: measuring its smoke anchors (--fresh)" and provenance.startswith(MEASURED_AT_SETUP)
    monkeypatch.setattr(os, "getloadavg", lambda: (1.0, 1.0, 1.0))
    said, provenance = demo()
    assert said == "[1/1] toy_timed: measuring its smoke anchors (the load average is 1.0, 0.3 when a demo measured them)"
    assert provenance.startswith(MEASURED_AT_SETUP)
