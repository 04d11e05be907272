"""`rebench demo` tells the truth: a verdict per solution with its reason, units, and a failing exit status."""

import pytest

from rebench_inspect import cli
from rebench_inspect.runtime.task import build_task
from rebench_inspect.spec.environment import Anchors


@pytest.fixture
def two_toys(toy_environment, monkeypatch):
    """`toy` (start 10 s → 0, reference 5 s → 1) and `toy_off`, the same with a reference anchor of 2 s: its
    reference solution lands at ln(10/5)/ln(10/2) = 0.431, outside 1 ± 0.25."""
    from rebench.environments import ENVIRONMENTS, TASKS

    toy = toy_environment.model_copy(update={"raw_unit": "s"})
    off_anchors = Anchors(start=10.0, reference=2.0, provenance="off on purpose")
    toy_off = toy.model_copy(update={"name": "toy_off", "anchors": {"smoke": off_anchors, "full": off_anchors}})
    for environment in (toy, toy_off):
        monkeypatch.setitem(ENVIRONMENTS, environment.name, environment)
        monkeypatch.setitem(
            TASKS,
            environment.name,
            lambda spec=environment, scale="full", **kwargs: build_task(spec.at(scale), **kwargs),
        )
    monkeypatch.setattr(cli.arguments, "environment_names", lambda: sorted(ENVIRONMENTS))


def test_demo_fails_an_environment_whose_reference_misses_its_anchor(two_toys, tmp_path, capsys):
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


def test_demo_passes_when_every_environment_reproduces_its_anchors(two_toys, tmp_path, capsys):
    assert cli.main(["demo", "toy", "--quiet", "--log-dir", str(tmp_path)]) == 0
    assert "FAIL" not in capsys.readouterr().out


def test_demo_says_what_each_sample_does_and_titles_its_logs_by_environment(two_toys, tmp_path, capsys):
    from inspect_ai.log import list_eval_logs, read_eval_log

    assert cli.main(["demo", "toy", "--log-dir", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    for solution in ("starting", "reference"):
        # a line when the sample starts, one per note of its transcript, one when it is scored
        assert f"    toy-{solution}: started" in lines
        assert f"    toy-{solution}: Scoring the starting solution (the score log's first entry)…" in lines
        assert any(line.startswith(f"    toy-{solution}: scored after ") for line in lines)
    [log] = [read_eval_log(info) for info in list_eval_logs(str(tmp_path))]
    assert log.eval.task == "rebench/sandbox_check/toy"


def test_report_on_the_demos_logs_says_in_one_line_what_it_needs(two_toys, tmp_path, capsys):
    logs, out = tmp_path / "logs", tmp_path / "report"
    assert cli.main(["demo", "toy", "--quiet", "--log-dir", str(logs)]) == 0
    capsys.readouterr()
    assert cli.main(["report", str(logs), "--out", str(out)]) == 1
    printed, err = capsys.readouterr()
    assert printed == "" and len(err.splitlines()) == 1
    assert err.startswith(f"rebench report: {logs} holds only sandbox-check logs (1, as `rebench demo`")
    assert "a report needs the logs of agent runs (`inspect eval rebench/ENV --model MODEL" in err
    assert not out.exists()


def test_an_errored_row_gives_the_exceptions_text_and_a_cancelled_one_says_why():
    from rebench_inspect.cli.demo import error_sentence

    assert error_sentence("ScoringInfrastructureError('measuring the smoke anchors: it failed')") == (
        "measuring the smoke anchors: it failed"
    )
    assert error_sentence('RuntimeError("it\'s gone")') == "it's gone"
    assert "stopped when the other sample" in error_sentence("CancelledError('Cancelled via cancel scope 7f8c')")
    assert error_sentence("plain words") == "plain words"


def test_a_timed_environments_samples_run_one_after_the_other(two_toys, tmp_path, monkeypatch):
    # Beside the other sample's work, the same starting solution timed 15 ms once and 32 ms the next time.
    import inspect_ai

    from rebench.environments import ENVIRONMENTS

    monkeypatch.setitem(ENVIRONMENTS, "toy", ENVIRONMENTS["toy"].model_copy(update={"smoke_anchor_runs": 1}))
    asked: dict[str, object] = {}
    real_eval = inspect_ai.eval

    def spying_eval(task, **kwargs):
        asked[task.name] = kwargs.get("max_samples")
        return real_eval(task, **kwargs)

    monkeypatch.setattr(inspect_ai, "eval", spying_eval)
    cli.main(["demo", "toy", "toy_off", "--quiet", "--log-dir", str(tmp_path)])
    assert asked == {"rebench/sandbox_check/toy": 1, "rebench/sandbox_check/toy_off": None}
