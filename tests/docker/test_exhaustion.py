"""What the agent shares with root in its container, used up by the agent, cannot turn its score into an errored sample.

One smoke eval in Docker (the generated sandbox) per environment whose scoring runs in the agent's container, and one
for all those that score apart (below). Its scripted agent, as `agent`, uses up each shared resource and leaves it so:
every byte of the capped temporary folders, then every process slot it can get, held by a background loop that grabs
any slot freed; it scores after each. Every scoring run (the agent's two, then
the final stop and score) must end in a verdict. Before the fixes, the scoring program's work folder in /tmp found no
free byte, and the harness's own `docker exec` no free process slot: the sample errored, which the report leaves out
and `--retry-on-error` reruns. (Each attack had an eval of its own until 2026-12-06; one eval saves the Docker tier a
container, a setup that scores the start and a final score per environment.)
"""

import pytest
from inspect_ai import eval
from inspect_ai.log import EvalSample

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.testing.fixtures import fixed_smoke_anchors
from rebench_inspect.testing.scripted import scripted_agent, tool_call

from .conftest import DOCKER_ENVIRONMENTS

pytestmark = [pytest.mark.docker]

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


def scored_by_an_agent_that_ran(name: str, calls: list, **task_args) -> tuple[EvalSample, list[str]]:
    """The sample of a smoke eval whose agent makes `calls`, then submits; and what each call returned."""
    task = TASKS[name](
        scale="smoke",
        sandbox="docker",
        time_budget_hours=0.5,
        anchors=fixed_smoke_anchors(ENVIRONMENTS[name]),
        **task_args,
    )
    [log] = eval(task, model=scripted_agent(calls), display="none", log_dir=None)
    [sample] = log.samples
    assert sample.error is None, sample.error.message
    assert log.status == "success", log.error
    return sample, [message.text for message in sample.messages if message.role == "tool"]


def entries(sample: EvalSample) -> list[dict]:
    return sample.scores["rebench_scorer"].metadata["score_log"]


# Open (issue 21): Inspect keeps its sandbox services at a fixed path in /var/tmp (`SERVICES_DIR`), so the model
# proxy's calls in the agent's container (finetune_target's judge: each call is a request file there) fail once the
# agent filled /var/tmp, and the sample errors. Environments that score apart open it in the scoring service.
SERVICES_IN_THE_AGENTS_TEMP = {"finetune_target"}


def fills_the_temporary_folders(name: str) -> bool:
    return name not in SERVICES_IN_THE_AGENTS_TEMP


# Scoring apart (`isolated_scoring`), the scoring program runs in the scoring service: in the agent's container only the
# harness's own steps run (`run_scoring_program`: the freeze, the workspace packed into a root-only folder and read
# out, the resume; then the final stop), the same code for every such environment, so the cheapest of them stands
# for all here. Each of the others repeated it around its own workload under these conditions: optimize_llm_foundry's
# five fine-tuning runs took 544 s of a cold CI (2026-12-06), rust_codecontests' 182 s, restricted_mlm's 156 s.
SCORING_APART_STANDS_FOR_ALL = "optimize_kernel"
EXHAUSTED_ENVIRONMENTS = [
    name
    for name in DOCKER_ENVIRONMENTS
    if not ENVIRONMENTS[name].isolated_scoring or name == SCORING_APART_STANDS_FOR_ALL
]


def test_the_environment_standing_for_those_that_score_apart_scores_apart():
    assert ENVIRONMENTS[SCORING_APART_STANDS_FOR_ALL].isolated_scoring


@pytest.mark.holds_the_agents_process_slots
@pytest.mark.parametrize("name", EXHAUSTED_ENVIRONMENTS)
def test_full_temporary_folders_then_every_process_slot_held_still_end_in_verdicts(name, smoke_image):
    smoke_image(ENVIRONMENTS[name])
    fills = fills_the_temporary_folders(name)
    filling = [tool_call("bash", command=FILL_TEMP_FOLDERS), tool_call("score")] if fills else []
    sample, printed = scored_by_an_agent_that_ran(
        name, [*filling, tool_call("bash", command=HOLD_IN_BACKGROUND), tool_call("score")]
    )
    if fills:
        assert printed[0].split() == ["0", "0", "0", "FILLED"], printed[0]
    held = printed[-2]
    assert held.startswith("HELD ") and int(held.split()[1]) > 0, held
    # the agent's score with the folders full scored the (valid) starting solution; its score with every slot held
    # ended in a verdict (the sample did not error); the stop ended every held slot, so the final scoring, with the
    # folders still full, scored the valid starting solution
    log = [(entry["label"], entry["valid"]) for entry in entries(sample)]
    assert log[0] == ("start", True) and log[-1] == ("final", True), log
    assert [label for label, _ in log] == ["start", *(["agent"] if fills else []), "agent", "final"], log
    if fills:
        assert log[1] == ("agent", True), log
    assert sample.scores["rebench_scorer"].metadata["agent_processes_surviving_the_stop"] == []


@pytest.mark.parametrize("name", sorted(SERVICES_IN_THE_AGENTS_TEMP.intersection(DOCKER_ENVIRONMENTS)))
@pytest.mark.xfail(strict=True, reason="Inspect's services live in /var/tmp, which the agent can fill")
def test_an_agent_that_fills_the_temporary_folders_still_gets_verdicts(name, smoke_image):
    """Where the model proxy's services share the agent's temporary folders (above), filling them alone."""
    smoke_image(ENVIRONMENTS[name])
    sample, printed = scored_by_an_agent_that_ran(
        name, [tool_call("bash", command=FILL_TEMP_FOLDERS), tool_call("score")]
    )
    assert printed[0].split() == ["0", "0", "0", "FILLED"], printed[0]
    assert [(entry["label"], entry["valid"]) for entry in entries(sample)] == [
        ("start", True),
        ("agent", True),
        ("final", True),
    ], entries(sample)
