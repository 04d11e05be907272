"""A human baseliner's `task score`, typed inside the container as `agent`, scores the workspace and lands in the log.

The eval (Inspect's `human_cli`, Docker sandbox) runs in a thread; the test plays the human with `docker exec` as
`agent`, without a terminal, doing what a login shell does first: `task start` (the agent's .bashrc runs it). Inspect
installs the `task` CLI (/opt/human_agent/task.py) *before* its human agent service writes the client module that CLI
imports (/var/tmp/sandbox-services/human_agent/human_agent.py) and starts answering requests, so a `task` command
typed as soon as task.py exists fails with "No module named 'human_agent'". `task start` succeeding is the condition
that the human can work: the module imports and the service answered. Then `task score` and `task status`, then
`task submit`. With `score_visible=false` neither may show a score value (the log still holds every one).
"""

import re
import subprocess
import threading
import time
import uuid

import pytest
from inspect_ai import eval
from inspect_ai.agent import human_cli
from inspect_ai.log import EvalLog
from inspect_ai.util import SandboxEnvironmentSpec

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.runtime.sandbox import compose, generated_file
from rebench_inspect.runtime.state import store_key
from rebench_inspect.testing.fixtures import fixed_smoke_anchors

from .conftest import DOCKER_ENVIRONMENTS

# The machinery is the same for every environment; optimize_kernel scores fastest. Named in the test id, so CI's
# per-environment selection (`-k optimize_kernel`) runs it with that environment's image.
NAME = "optimize_kernel"
TASK_CLI = "/opt/human_agent/task.py"
HUMAN_AGENT_UP_TIMEOUT_S = 600
EVAL_END_TIMEOUT_S = 600
DOCKER_CALL_TIMEOUT_S = 60
RUN_MARKER = "REBENCH_HUMAN_CLI_TEST"  # set in this eval's container only: tells it from other runs on the engine
SCORE_VALUES = ("raw", "transformed", "normalised")

pytestmark = [
    pytest.mark.docker,
    pytest.mark.parametrize("name", [NAME] if NAME in DOCKER_ENVIRONMENTS else []),
]


def as_agent(container: str, command: list[str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        ["docker", "exec", "-i", "-u", "agent", "-w", "/home/agent/workspace", container, *command],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def marked_containers(marker: str) -> list[str]:
    """This eval's running containers. Only Compose's (an eval's sandbox) are inspected: in CI the engine builds
    images meanwhile, and `docker inspect` of a build step's container as the build removed it hung for 30 minutes
    (2026-12-07); a call that still hangs counts as none found this time (the callers poll)."""
    try:
        listing = subprocess.run(
            ["docker", "ps", "-q", "--filter", "label=com.docker.compose.project"],
            capture_output=True,
            text=True,
            check=False,
            timeout=DOCKER_CALL_TIMEOUT_S,
        ).stdout.split()
        if not listing:
            return []
        environments = subprocess.run(
            ["docker", "inspect", "--format", "{{.Id}} {{json .Config.Env}}", *listing],
            capture_output=True,
            text=True,
            check=False,
            timeout=DOCKER_CALL_TIMEOUT_S,
        ).stdout.splitlines()
    except subprocess.TimeoutExpired:
        return []
    return [line.split()[0] for line in environments if f'"{RUN_MARKER}={marker}"' in line]


def remove_containers(marker: str) -> None:
    """The exercise waits for its human forever: removing its container ends the eval (as an error)."""
    for container in marked_containers(marker):
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)


def start_the_clock(marker: str, eval_thread: threading.Thread) -> str:
    """This eval's container, once `task start` succeeded in it (see the module docstring)."""
    deadline = time.monotonic() + HUMAN_AGENT_UP_TIMEOUT_S
    last = "the container never appeared"
    while time.monotonic() < deadline and eval_thread.is_alive():
        for container in marked_containers(marker):
            started = as_agent(container, ["python3", TASK_CLI, "start"])
            if started.returncode == 0:
                return container
            last = started.stdout + started.stderr
        time.sleep(1)  # poll interval of the condition above
    raise AssertionError(f"`task start` never succeeded in the container: {last[-2000:]}")


def as_printed(text: str) -> str:
    """The CLI's output without colour codes and without the line breaks and spaces its console layout adds."""
    return re.sub(r"\s+", "", re.sub(r"\x1b\[[0-9;]*m", "", text))


def shown_values(entry: dict) -> list[str]:
    """The entry's score values as the CLI would print them (values too short to tell from other text left out)."""
    return [repr(entry[name]) for name in SCORE_VALUES if len(repr(entry[name])) > 4]


@pytest.mark.parametrize("visible", [True, False], ids=["scores_shown", "scores_hidden"])
def test_task_score_in_the_container_lands_in_the_score_log(name, visible, smoke_image):
    environment = ENVIRONMENTS[name]
    smoke_image(environment)
    marker = uuid.uuid4().hex
    task = TASKS[name](
        scale="smoke",
        sandbox="docker",
        time_budget_hours=0.5,
        score_visible=visible,
        anchors=fixed_smoke_anchors(environment),
    )
    # rebench's own services (with the scoring service where the environment scores apart), the agent's marked
    smoke = environment.at("smoke")
    document = compose(smoke)
    document["services"]["default"] = {**document["services"]["default"], "environment": {RUN_MARKER: marker}}
    task.sandbox = SandboxEnvironmentSpec("docker", str(generated_file(smoke, "compose", document)))
    solver = human_cli(answer=False, intermediate_scoring=True, record_session=False, user="agent")
    logs: list[EvalLog] = []
    eval_thread = threading.Thread(target=lambda: logs.extend(eval(task, solver=solver, display="none", log_dir=None)))
    eval_thread.start()
    submitted = False
    try:
        container = start_the_clock(marker, eval_thread)
        scored = as_agent(container, ["python3", TASK_CLI, "score"])
        assert scored.returncode == 0, scored.stdout + scored.stderr
        status = as_agent(container, ["python3", TASK_CLI, "status"])
        seen = as_printed(scored.stdout + status.stdout)
        # Its exit status does not matter: the final score stops every process of `agent`, this one included.
        as_agent(container, ["python3", TASK_CLI, "submit"], stdin="y\n")
        submitted = True
    finally:
        if not submitted:
            remove_containers(marker)
        eval_thread.join(timeout=EVAL_END_TIMEOUT_S)
        ended = not eval_thread.is_alive()
        if not ended:
            remove_containers(marker)
            eval_thread.join(timeout=EVAL_END_TIMEOUT_S)
    assert ended, "the eval did not end after `task submit`"
    [log] = logs
    assert log.status == "success", log.error
    [sample] = log.samples
    entries = sample.scores["rebench_scorer"].metadata["score_log"]
    assert [entry["label"] for entry in entries] == ["start", "agent", "final"]
    assert entries[1]["valid"] and entries[2]["valid"], entries
    # the participant sees validity; the score values only where they are visible, while the log keeps them all
    printed = [text for text in [*SCORE_VALUES, *shown_values(entries[1])] if text in seen]
    assert printed == ([*SCORE_VALUES, *shown_values(entries[1])] if visible else []), seen
    assert '"valid":true' in seen, seen
    assert sample.store[store_key("score_log")][1] == entries[1]
    intermediate = [event for event in sample.events if event.event == "score" and event.intermediate]
    assert [event.score.answer for event in intermediate] == ["entry 0 (start)", "entry 1 (agent)"]
    assert sample.scores["rebench_scorer"].metadata["valid"]
