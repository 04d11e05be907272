"""A sample whose container dies resumes from its last checkpoint through `inspect eval-retry` (issue 47).

One smoke eval in Docker: a scripted agent writes a file and scores (the default agent then checkpoints), writes a
second file and waits; the test kills the agent's container (`docker kill`), as an out-of-memory kill or a lost node
would. The eval errors; `eval_retry` resumes the sample: the first file is back, the second (after the checkpoint) is
not, the score log keeps the start's and the agent's entries with a mark where the resume happened, the start is not
scored again, and the sample ends `success` with one final score. Without checkpoints the retry starts from the
starting workspace and its score log has no entry from before the crash.
"""

import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from inspect_ai import eval, eval_retry
from inspect_ai.log import EvalLog

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.runtime.sandbox import image_tag
from rebench_inspect.testing.fixtures import fixed_smoke_anchors
from rebench_inspect.testing.scripted import scripted_agent, tool_call

pytestmark = [pytest.mark.docker]

WORKSPACE = "/home/agent/workspace"
KEPT, LOST, WAITING = f"{WORKSPACE}/kept.txt", f"{WORKSPACE}/lost.txt", f"{WORKSPACE}/waiting-for-the-kill"
KILL_WAIT_S = 300
# The retried agent's first call: it can still write in its workspace, and lists it.
WRITE_AND_LIST = f"touch {WORKSPACE}/after-resume && ls {WORKSPACE}"


def agent_containers(image: str) -> list[str]:
    listed = subprocess.run(
        ["docker", "ps", "--filter", f"ancestor={image}", "--format", "{{.ID}} {{.Names}}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split("\n")
    # The agent's container is the compose service `default` (a scoring service, where there is one, runs apart).
    return [line.split()[0] for line in listed if line and "-default-" in line]


def kill_the_agent_container_once(image: str, ready: Callable[[str], bool], killed: list[str]) -> None:
    """`docker kill` the agent's container once `ready(container)`."""
    deadline = time.monotonic() + KILL_WAIT_S
    while time.monotonic() < deadline:
        for container in agent_containers(image):
            if ready(container):
                subprocess.run(["docker", "kill", container], capture_output=True, check=True)
                killed.append(container)
                return
        time.sleep(0.2)


def agent_waits(container: str) -> bool:
    return subprocess.run(["docker", "exec", container, "test", "-e", WAITING], check=False).returncode == 0


def agent_completed(log_dir: Path) -> Callable[[str], bool]:
    """Ready once the checkpoint Inspect takes when the agent has submitted is written: final scoring is running."""
    return lambda _: any(
        json.loads(path.read_text()).get("trigger") == "agent_complete"
        for path in log_dir.glob("*.checkpoints/**/ckpt-*.json")
    )


def crashed_then_retried(
    name: str,
    log_dir: Path,
    monkeypatch,
    *,
    checkpoint_minutes: float = 30,
    after_submit: bool = False,
) -> EvalLog:
    """The retried eval of a sample whose container was killed while its agent waited (`after_submit`: during the
    final scoring run)."""
    environment = ENVIRONMENTS[name]
    task = TASKS[name](
        scale="smoke",
        sandbox="docker",
        time_budget_hours=0.5,
        anchors=fixed_smoke_anchors(environment),
        checkpoint_minutes=checkpoint_minutes,
    )
    first_calls = [
        tool_call("bash", command=f"echo before > {KEPT}"),
        tool_call("score"),
    ]
    if not after_submit:
        first_calls.append(tool_call("bash", command=f"echo after > {LOST}; touch {WAITING}; sleep 600"))
    ready = agent_completed(log_dir) if after_submit else agent_waits
    image = image_tag(name, "smoke")
    killed: list[str] = []
    killer = threading.Thread(target=kill_the_agent_container_once, args=(image, ready, killed), daemon=True)
    killer.start()
    [crashed] = eval(task, model=scripted_agent(first_calls), display="none", log_dir=str(log_dir))
    killer.join()
    assert killed, "the agent's container was never killed"
    assert crashed.status == "error"
    # eval-retry rebuilds the model from the log's name and arguments: the retried agent's script goes in its place.
    retried_agent = scripted_agent([tool_call("bash", command=WRITE_AND_LIST), tool_call("score_log")])
    monkeypatch.setattr("inspect_ai._eval.eval.get_model", lambda *args, **kwargs: retried_agent)
    [retried] = eval_retry(crashed, log_dir=str(log_dir), display="none")
    return retried


# optimize_kernel scores apart: the resume makes its scoring service's kept starting workspace again.
@pytest.mark.parametrize("name", ["scaling_law", "optimize_kernel"])
def test_a_killed_sample_resumes_from_its_last_checkpoint(name, smoke_image, tmp_path, monkeypatch):
    smoke_image(ENVIRONMENTS[name])
    retried = crashed_then_retried(name, tmp_path, monkeypatch)
    assert retried.status == "success", retried.error
    [sample] = retried.samples
    assert sample.error is None
    tool_outputs = [message.text for message in sample.messages if message.role == "tool"]
    listing = tool_outputs[-2]
    assert "kept.txt" in listing and "lost.txt" not in listing and "after-resume" in listing
    final = sample.scores["rebench_scorer"]
    labels = [entry["label"] for entry in final.metadata["score_log"]]
    assert labels == ["start", "agent", "final"]  # the start is not scored again; one final score
    resumes = sample.store["RebenchState:resumes"]
    assert [(mark["attempt"], mark["score_log_entries"]) for mark in resumes] == [("resume", 2)]
    assert resumes[0]["working_time_s"] > 0  # the working time used before the crash counts
    # the model was told of the resume once
    told = [m.text for m in sample.messages if m.role == "user" and "interrupted and has resumed" in m.text]
    assert len(told) == 1
    checkpoints = list(tmp_path.glob("*.checkpoints/**/ckpt-*.json"))
    report_cost(checkpoints)


def report_cost(checkpoint_files: list[Path]) -> None:
    """Print each checkpoint's trigger, seconds and bytes (the report's cost line; `pytest -s` shows it)."""
    for path in sorted(checkpoint_files):
        checkpoint = json.loads(path.read_text())
        print(
            f"checkpoint {path.name}: trigger {checkpoint['trigger']}, {checkpoint['duration_ms'] / 1000:.2f} s, "
            f"{checkpoint['size_bytes']} bytes"
        )


@pytest.mark.parametrize("name", ["scaling_law"])
def test_without_checkpoints_a_killed_sample_starts_again(name, smoke_image, tmp_path, monkeypatch):
    smoke_image(ENVIRONMENTS[name])
    retried = crashed_then_retried(name, tmp_path, monkeypatch, checkpoint_minutes=0)
    [sample] = retried.samples
    listing = [message.text for message in sample.messages if message.role == "tool"][-2]
    assert "kept.txt" not in listing
    labels = [entry["label"] for entry in sample.scores["rebench_scorer"].metadata["score_log"]]
    assert labels == ["start", "final"]


@pytest.mark.parametrize("name", ["scaling_law"])
def test_a_sample_killed_after_submit_resumes_for_scoring_only(name, smoke_image, tmp_path, monkeypatch):
    smoke_image(ENVIRONMENTS[name])
    retried = crashed_then_retried(name, tmp_path, monkeypatch, after_submit=True)
    assert retried.status == "success", retried.error
    [sample] = retried.samples
    # no agent turn: the retried script's first call never ran
    calls = [call for message in sample.messages if message.role == "assistant" for call in message.tool_calls or []]
    assert calls and not any(call.arguments.get("command") == WRITE_AND_LIST for call in calls)
    resumes = sample.store["RebenchState:resumes"]
    assert [(mark["attempt"], mark["score_log_entries"]) for mark in resumes] == [("resume_for_scoring", 2)]
    labels = [entry["label"] for entry in sample.scores["rebench_scorer"].metadata["score_log"]]
    assert labels == ["start", "agent", "final"]
