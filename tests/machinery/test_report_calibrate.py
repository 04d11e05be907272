"""`rebench calibrate`: anchors from measurements, the anchors file, and a calibration run on the toy environment."""

import json
import math

import pytest

from rebench_inspect.spec.environment import Transform
from rebench_inspect.spec.normalise import raw_from_y
from rebench_inspect.tools.calibrate import anchors_document, parse_probe


@pytest.mark.parametrize("kind", list(Transform))
def test_raw_from_y_inverts_the_transform(kind):
    from rebench_inspect.spec.normalise import transform

    for raw in (1.9, 2.7, 9.0):  # a loss must exceed 1.5
        assert math.isclose(raw_from_y(kind, transform(kind, raw)), raw)


def test_timing_anchors_are_the_measured_means_in_y_and_the_file_round_trips(toy_environment, tmp_path):
    # the toy environment is a timing one (ln seconds): its anchors are replaced
    document = anchors_document(toy_environment.at("smoke"), [8.0, 12.5, 10.0], [4.0, 6.25], [{"gpu": ["H200"]}])
    assert math.isclose(document["anchors"]["start"], 10.0)  # geometric mean of 8, 12.5, 10
    assert math.isclose(document["anchors"]["reference"], 5.0)
    assert document["measured"]["start"]["runs"] == 3 and document["measured"]["start"]["y_std"] > 0
    # the toy's own anchors are 10 → 0 and 5 → 1: the measurements land on them
    assert math.isclose(document["normalised_on_built_in_anchors"]["start"], 0.0, abs_tol=1e-12)
    assert math.isclose(document["normalised_on_built_in_anchors"]["reference"], 1.0)
    path = tmp_path / "anchors.json"
    path.write_text(json.dumps(document))
    anchors = toy_environment.at("smoke", path).anchors
    assert math.isclose(anchors.start, 10.0) and math.isclose(anchors.reference, 5.0)
    assert anchors.provenance.startswith(f"calibration file {path}") and "H200" in anchors.provenance
    with pytest.raises(ValueError, match="not toy at full scale"):
        toy_environment.at("full", path)


def test_non_timing_environments_keep_the_built_in_anchors(toy_environment, tmp_path):
    win_rate = toy_environment.model_copy(update={"transform": Transform.IDENTITY, "lower_is_better": False})
    document = anchors_document(win_rate.at("smoke"), [9.0, 11.0], [5.0, 5.0], [])
    assert document["replaces_built_in_anchors"] is False
    assert document["anchors"] == {"start": 10.0, "reference": 5.0}
    path = tmp_path / "check.json"
    path.write_text(json.dumps(document))
    assert win_rate.at("smoke", path).anchors == win_rate.anchors["smoke"]


def test_probe_output_is_parsed():
    seen = parse_probe("cpus=16\nmachine=x86_64\ngpu=NVIDIA H200, 550.1\npython=3.11.7\n")
    assert seen == {"gpu": ["NVIDIA H200, 550.1"], "cpus": "16", "machine": "x86_64", "python": "3.11.7"}


def test_a_task_with_an_anchors_file_scores_on_them_and_the_report_keeps_them_apart(
    toy_environment, agent_script, tmp_path
):
    from inspect_ai import eval

    from rebench_inspect.runtime.task import build_task
    from rebench_inspect.tools.report import make_report
    from rebench_inspect.testing.scripted import tool_call

    path = tmp_path / "anchors.json"
    # measured here: start 20 s, reference 5 s (the toy's own anchors are 10 s and 5 s)
    path.write_text(json.dumps(anchors_document(toy_environment.at("smoke"), [20.0], [5.0], [])))
    logs = tmp_path / "logs"
    for anchors in (None, str(path)):
        task = build_task(toy_environment.at("smoke", anchors), sandbox="local", time_budget_hours=0.1)
        [log] = eval(task, model=agent_script([tool_call("bash", command="echo 10 > answer.txt")]), display="none",
                     log_dir=str(logs))  # fmt: skip
        assert log.status == "success", log.error
        final = log.samples[0].scores["rebench_scorer"]
        if anchors is None:
            assert final.metadata["anchors"]["provenance"] == "toy" and final.value["normalised"] == 0.0
        else:
            assert final.metadata["anchors"]["provenance"].startswith(f"calibration file {path}")
            assert math.isclose(final.metadata["anchors"]["raw_start"], 20.0)
            assert math.isclose(final.value["normalised"], 0.5)  # ln 10 is halfway between ln 20 and ln 5
    report = make_report([logs], tmp_path / "report", samples=50)
    assert len(report.rows) == 2 and report.cohorts == []
    assert {row.anchors.partition(": ")[0] for row in report.rows} == {"smoke scale"}  # which anchors, by scale
    assert any("toy was scored with different anchors" in warning for warning in report.warnings)


def test_every_environment_task_takes_an_anchors_file(toy_environment, tmp_path):
    from rebench.environments import TASKS

    path = tmp_path / "toy-anchors.json"
    path.write_text(json.dumps(anchors_document(toy_environment.at("smoke"), [20.0], [5.0], [])))
    for name, make_task in TASKS.items():
        # a file made for another environment is refused: the parameter reaches the anchors loader
        with pytest.raises(ValueError, match=f"not {name} at smoke scale"):
            make_task(scale="smoke", sandbox="local", anchors=str(path))


def test_a_calibration_run_measures_the_start_and_the_reference_once_each(toy_environment, tmp_path, monkeypatch):
    """Each run is the sandbox check's one sample: its first score-log entry (the start, 10 s) and its last (the
    reference, 5 s)."""
    from rebench.environments import ENVIRONMENTS, TASKS
    from rebench_inspect.runtime.task import build_task
    from rebench_inspect.tools.calibrate import run_calibration

    monkeypatch.setitem(ENVIRONMENTS, "toy", toy_environment)
    monkeypatch.setitem(
        TASKS,
        "toy",
        lambda scale="full", anchors=None, **kwargs: build_task(toy_environment.at(scale, anchors), **kwargs),
    )
    document = run_calibration("toy", 2, "local", "smoke", str(tmp_path))
    assert document["measured"]["start"]["raw_values"] == [10.0, 10.0]
    assert document["measured"]["reference"]["raw_values"] == [5.0, 5.0]
    assert math.isclose(document["anchors"]["start"], 10.0) and math.isclose(document["anchors"]["reference"], 5.0)
    assert document["hardware"]["cpus"].isdigit()
