"""What the agent shares with root in its container, used up by the agent, cannot turn its score into an errored sample.

Each test is a smoke eval in Docker (the generated sandbox) whose scripted agent, as `agent`, uses up one shared
resource and leaves it so: every process slot it can get, held by a background loop that grabs any slot freed, or
every byte of the capped temporary folders. Then it scores and submits; the scoring runs (the agent's `score`, then
the final stop and score) must each end in a verdict. Before the fixes, the harness's own `docker exec` found no free
process slot, and the scoring program's work folder in /tmp no free byte: the sample errored, which the report leaves
out and `--retry-on-error` reruns.
"""

import pytest
from inspect_ai import eval
from inspect_ai.log import EvalSample

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.testing.fixtures import fixed_smoke_anchors
from rebench_inspect.testing.scripted import scripted_agent, tool_call

from .conftest import DOCKER_ENVIRONMENTS

pytestmark = [pytest.mark.docker, pytest.mark.parametrize("name", DOCKER_ENVIRONMENTS)]

SATURATED = "/home/agent/.slots-held"
# Forks children that sleep forever, and retries every refused fork, so a slot that frees is taken again at once; after
# a run of refusals it writes how many it holds to SATURATED (once) and goes on.
HOLD_EVERY_SLOT = f"""
import os, time
held = refused = 0
while True:
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        if refused == 200:
            with open("{SATURATED}", "w") as mark:
                mark.write(str(held))
        time.sleep(0.005)
        continue
    if pid == 0:
        while True:
            time.sleep(3600)
    held += 1
"""
# `[`, `read` and `echo` are bash builtins: the wait needs no process slot of its own.
HOLD_IN_BACKGROUND = (
    f"setsid nohup python3 -c '{HOLD_EVERY_SLOT}' >/dev/null 2>&1 & "
    f"while [ ! -s {SATURATED} ]; do :; done; read -r held < {SATURATED}; echo HELD $held"
)
TEMP_FOLDERS = ("/tmp", "/var/tmp", "/dev/shm")
FILL_TEMP_FOLDERS = " ".join(
    [f"dd if=/dev/zero of={folder}/filler bs=1M 2>/dev/null;" for folder in TEMP_FOLDERS]
    + [f"df --output=avail {' '.join(TEMP_FOLDERS)} | tail -n +2 | tr -s ' \\n' ' '; echo FILLED"]
)


def scored_by_an_agent_that_ran(name: str, command: str) -> tuple[EvalSample, str]:
    """The sample of a smoke eval whose agent runs `command` with its bash tool, then scores and submits; and what the
    command printed."""
    task = TASKS[name](
        scale="smoke", sandbox="docker", time_budget_hours=0.5, anchors=fixed_smoke_anchors(ENVIRONMENTS[name])
    )
    model = scripted_agent([tool_call("bash", command=command), tool_call("score")])
    [log] = eval(task, model=model, display="none", log_dir=None)
    [sample] = log.samples
    assert sample.error is None, sample.error.message
    assert log.status == "success", log.error
    [printed, *_] = [message.text for message in sample.messages if message.role == "tool"]
    return sample, printed


def entries(sample: EvalSample) -> list[dict]:
    return sample.scores["rebench_scorer"].metadata["score_log"]


@pytest.mark.holds_the_agents_process_slots
def test_an_agent_holding_every_process_slot_cannot_stop_the_final_score(name, smoke_image):
    smoke_image(ENVIRONMENTS[name])
    sample, printed = scored_by_an_agent_that_ran(name, HOLD_IN_BACKGROUND)
    assert printed.startswith("HELD ") and int(printed.split()[1]) > 0, printed
    final = sample.scores["rebench_scorer"]
    assert [entry["label"] for entry in entries(sample)][-1] == "final"
    # the stop ended every held slot: the final scoring ran on the starting solution, which is valid
    assert final.metadata["agent_processes_surviving_the_stop"] == []
    assert entries(sample)[-1]["valid"], entries(sample)[-1]


# Open (issue 21): Inspect keeps its sandbox services at a fixed path in /var/tmp (`SERVICES_DIR`), so the model
# proxy's calls in the agent's container (finetune_target's judge: each call is a request file there) fail once the
# agent filled /var/tmp, and the sample errors. Environments that score apart open it in the scoring service.
SERVICES_IN_THE_AGENTS_TEMP = {"finetune_target"}


def test_an_agent_that_fills_the_temporary_folders_still_gets_verdicts(name, smoke_image, request):
    smoke_image(ENVIRONMENTS[name])
    if name in SERVICES_IN_THE_AGENTS_TEMP:
        request.applymarker(
            pytest.mark.xfail(strict=True, reason="Inspect's services live in /var/tmp, which the agent can fill")
        )
    sample, printed = scored_by_an_agent_that_ran(name, FILL_TEMP_FOLDERS)
    assert printed.split() == ["0", "0", "0", "FILLED"], printed
    # the agent's own score and the final one scored the (valid) starting solution with the folders full
    assert [(entry["label"], entry["valid"]) for entry in entries(sample)] == [
        ("start", True),
        ("agent", True),
        ("final", True),
    ], entries(sample)
