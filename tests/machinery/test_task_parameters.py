"""`-T` parameters as Inspect hands them to a rebench task: an unknown name or a bad value stops the run before it
starts, in one sentence that names the parameter and what is allowed (Inspect itself only warns about unknown
names, and the default eight-hour run would start)."""

import logging
import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from inspect_ai._eval.registry import task_create

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.environment_task import TaskParameterError

BAD_PARAMETERS = {
    "misspelt name": ({"time_budget_hour": 1}, "unknown parameter 'time_budget_hour': did you mean time_budget_hours?"),
    "unknown name": ({"gpus": 2}, "unknown parameter 'gpus': (one of: scale, time_budget_hours, token_limit"),
    "hours not a number": ({"time_budget_hours": "abc"}, "time_budget_hours must be a positive number of hours"),
    "no hours": ({"time_budget_hours": 0}, "time_budget_hours must be a positive number"),
    "unknown scale": ({"scale": "medium"}, "scale must be smoke or full, not 'medium'"),
    "unknown sandbox": ({"sandbox": "podman"}, "sandbox must be docker, k8s, local, not 'podman'"),
    "no epochs": ({"epochs": 0}, "epochs must be a whole number of at least 1, not 0"),
    "fractional limit": ({"message_limit": 2.5}, "message_limit must be a whole number of at least 1"),
    "visibility not a boolean": ({"score_visible": "yes"}, "score_visible must be true or false, not 'yes'"),
    "anchors file missing": ({"anchors": "no/such/anchors.json"}, "anchors file 'no/such/anchors.json' unusable"),
    "negative interval": ({"checkpoint_minutes": -5}, "checkpoint_minutes must be a number of minutes (e.g. 30), or 0"),
}


@pytest.mark.parametrize("arguments, message", BAD_PARAMETERS.values(), ids=BAD_PARAMETERS.keys())
def test_a_bad_parameter_is_refused_in_one_sentence_naming_it(arguments, message):
    with pytest.raises(TaskParameterError) as refused:
        task_create("rebench/optimize_kernel", **{"sandbox": "local", **arguments})
    text = str(refused.value)
    assert text.startswith("rebench/optimize_kernel: ") and message in text
    assert "\n" not in text


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_every_environment_refuses_unknown_names_and_takes_its_own(name):
    with pytest.raises(TaskParameterError, match=f"rebench/{name}: unknown parameter 'budget'"):
        task_create(f"rebench/{name}", budget=1)
    # YAML-typed values as `-T` delivers them: an int number of hours is fine and becomes the working limit.
    task = task_create(f"rebench/{name}", scale="smoke", sandbox="local", time_budget_hours=2)
    assert task.working_limit == 2 * 3600


def test_an_environment_that_hides_scores_refuses_score_visible():
    with pytest.raises(TaskParameterError, match="score_visible must be false: scaling_law never shows scores"):
        task_create("rebench/scaling_law", sandbox="local", score_visible=True)


REFUSED_ON_THE_COMMAND_LINE = {
    "misspelt name": (
        "time_budget_hour=1",
        "rebench/optimize_kernel: unknown parameter 'time_budget_hour': did you mean time_budget_hours? (one of: "
        "scale, time_budget_hours, token_limit, message_limit, sandbox, agent_user, score_visible, epochs, anchors, "
        "checkpoint_minutes)",
    ),
    "value not a number": (
        "time_budget_hours=abc",
        "rebench/optimize_kernel: time_budget_hours must be a positive number of hours (e.g. 0.5, 2 or 8), not 'abc'",
    ),
}


@pytest.mark.parametrize(
    "parameter, message", REFUSED_ON_THE_COMMAND_LINE.values(), ids=REFUSED_ON_THE_COMMAND_LINE.keys()
)
def test_inspect_eval_stops_before_the_run_with_one_line_and_no_traceback(parameter, message, tmp_path):
    inspect = Path(sys.executable).parent / "inspect"
    command = [str(inspect), "eval", "rebench/optimize_kernel", "--model", "none", "--log-dir", str(tmp_path / "logs")]
    refused = subprocess.run(
        [*command, "-T", parameter],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "COLUMNS": "400"},  # Inspect's console wraps to the terminal's width
        timeout=300,
    )
    assert refused.returncode != 0
    printed = [line for line in (refused.stdout + refused.stderr).splitlines() if line.strip()]
    assert printed == [message]
    assert not (tmp_path / "logs").exists()  # no run started


COMMAND_LINES = {
    "task's own sandbox": (["eval", "rebench/optimize_kernel"], True),
    "--sandbox local": (["eval", "rebench/optimize_kernel", "--sandbox", "local"], False),
    "--sandbox=k8s": (["eval", "rebench/optimize_kernel", "--sandbox=k8s:values.yaml"], False),
    "--sandbox docker": (["eval", "rebench/optimize_kernel", "--sandbox", "docker"], True),
}


@pytest.mark.parametrize("argv, warned", COMMAND_LINES.values(), ids=COMMAND_LINES.keys())
def test_docker_problems_are_logged_only_for_runs_in_docker(argv, warned, monkeypatch, caplog):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.delenv("INSPECT_EVAL_SANDBOX", raising=False)
    monkeypatch.setattr(sys, "argv", ["inspect", *argv])
    with caplog.at_level(logging.WARNING):
        task_create("rebench/optimize_kernel", scale="smoke")
    assert any("no Docker engine is reachable" in record.getMessage() for record in caplog.records) is warned


def test_the_sandbox_variable_counts_as_the_command_line():
    from rebench_inspect.runtime.sandbox import sandbox_on_the_command_line

    assert sandbox_on_the_command_line([], {"INSPECT_EVAL_SANDBOX": "local"}) == "local"
    assert sandbox_on_the_command_line(["--sandbox-cleanup", "false"], {}) is None


@pytest.mark.parametrize(
    "sandbox, minutes, checkpointed",
    [("docker", 30, True), ("k8s", 30, True), ("docker", 0, False), ("local", 30, False)],
)
def test_checkpoints_are_on_for_container_sandboxes_unless_turned_off(sandbox, minutes, checkpointed):
    from inspect_ai.util import ArchiveSnapshots, TimeInterval

    task = task_create("rebench/scaling_law", scale="smoke", sandbox=sandbox, checkpoint_minutes=minutes)
    assert (task.checkpoint is not None and task.checkpoint.sandbox_paths is not None) == checkpointed
    if checkpointed:
        assert task.checkpoint.trigger == TimeInterval(every=timedelta(minutes=minutes))
        paths = task.checkpoint.sandbox_paths
        assert paths["default"].paths == ["/home/agent"] and paths["default"].strategy == ArchiveSnapshots()
        assert paths["scoring"] == []  # the scoring service's files are never checkpointed
