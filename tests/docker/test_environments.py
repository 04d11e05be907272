"""Each environment's smoke eval in Docker, its agent's shells, and its security model probed from inside the
container as `agent`.

One eval per environment, read by the three tests here: setup scores the starting solution and the reference
solver installs the reference (the anchors); then a scripted agent runs what an agent following the instructions
would run (which `python` and `pip` its shells find), probes the sandbox with the bash tool (which runs as `agent`)
and leaves processes behind; rebench's final score, after the final stop, scores the reference; a probe scorer that
runs after it looks at the container as root. (Two evals until 2026-12-06: each costs the Docker tier a container, a
setup that scores the start and a final score, for optimize_llm_foundry about 2.5 minutes.) An environment in
REFERENCE_BUILT_ON_THE_HOST gets its reference's result written into the workspace instead (below).

The agent's shells: its bash and python tools run `bash --login -c` (as Inspect's own tools do), and a login shell
reads /etc/profile, which on Debian and Ubuntu resets PATH to the distribution's default; without the base image's
/etc/profile.d script the agent's `python3` is the system one, without torch.
"""

import math
from collections.abc import Callable
from pathlib import Path

import pytest
from inspect_ai import eval
from inspect_ai.log import EvalLog
from inspect_ai.scorer import Score, Target, scorer
from inspect_ai.solver import Generate, Solver, TaskState, chain, solver
from inspect_ai.util import sandbox

from rebench.environments import ENVIRONMENTS, TASKS
from rebench.maintenance import reference_solution
from rebench_inspect.runtime.reference import write_over_workspace
from rebench_inspect.runtime.state import store_key
from rebench_inspect.spec.environment import Transform
from rebench_inspect.testing.fixtures import cached_reference_result, fixed_smoke_anchors
from rebench_inspect.testing.scripted import scripted_agent, tool_call

from .conftest import DOCKER_ENVIRONMENTS

pytestmark = [pytest.mark.docker, pytest.mark.parametrize("name", DOCKER_ENVIRONMENTS)]

WHICH_PYTHON = 'for tool in python python3 pip; do command -v "$tool"; done; echo "VENV=$VIRTUAL_ENV"'
KERNEL_EXAMPLE = (
    "import torch, triton\n"
    "from solution import prefix_sum\n"
    "print(prefix_sum(torch.tensor([1, 2, -3, 4, 5], dtype=torch.int32)).tolist())\n"
)
# Per environment: commands its instructions give the agent (or their worked example), and a text the output shows
# when the command ran with the image's packages.
INSTRUCTION_COMMANDS: dict[str, list[tuple[str, dict[str, str], str]]] = {
    "optimize_kernel": [
        # the instructions' example: x = [1, 2, -3, 4, 5] gives y = [0, 2, 2, 2, 7]; Triton "is installed"
        ("bash", {"command": f"python3 -c '{KERNEL_EXAMPLE}'"}, "[0, 2, 2, 2, 7]"),
        ("python", {"code": KERNEL_EXAMPLE}, "[0, 2, 2, 2, 7]"),
    ],
    "rust_codecontests": [("bash", {"command": "python validate.py --help"}, "--public-only")],
    # one experiment under the cap, as the instructions run them (the example config itself is over the cap)
    "scaling_law": [
        ("bash", {"command": "printf 'n_embd = 8\\nmax_iters = 10\\n' > tiny.py && python train.py tiny.py"}, "RESULT ")
    ],
    # the judge through the agent's door in the container (the instructions' evaluation.py)
    "finetune_target": [("bash", {"command": "python evaluation.py --prompts 2"}, '"win_rate"')],
}
# Environments whose eval writes the reference's result, built once per machine on the host (the fixture
# `reference_result`, as the contract tests use it), into the workspace instead of running its solve.sh in the
# container. finetune_target's reference makes 1,152 judge calls, each two or three `docker exec`s through Inspect's
# agent bridge (about 0.4 s of CPU): about 450 s of its 600 s eval in CI, the Docker tier's longest test. Its training
# through the judge's door runs on the local sandbox (tests/finetune_target/test_eval.py); here the agent's own judge
# calls reach the door in the container (INSTRUCTION_COMMANDS) and every scoring run's judge calls the scoring door.
# restricted_mlm's reference trained its model from scratch in the container: 376 s in a cold CI (2026-12-06);
# scaling_law's ran its 18 experiments (about 200 s in CI) and fix_embedding's its repair (about 120 s): the same
# work as the host's contract tests', whose cached result (built once per machine, by whichever test asks first)
# serves both now. scaling_law's experiment launcher still runs in the container, as the agent, through the
# instructions' command (INSTRUCTION_COMMANDS).
REFERENCE_BUILT_ON_THE_HOST = {"finetune_target", "fix_embedding", "restricted_mlm", "scaling_law"}


def shell_calls(name: str) -> list[tuple[str, dict[str, str], str]]:
    """The agent's shell calls: (tool, arguments, a text its output shows)."""
    return [
        ("bash", {"command": WHICH_PYTHON}, "VENV="),
        ("bash", {"command": "pip --version"}, " from "),
        ("python", {"code": "import sys, torch; print(sys.prefix)"}, "/"),
        *INSTRUCTION_COMMANDS.get(name, []),
    ]


# Everything the agent user may write; anything else it can write would be a way into what root runs.
AGENT_WRITABLE = ("/home/agent", "/tmp", "/var/tmp", "/dev", "/proc", "/sys", "/run/lock", "/var/lock", "/dev/shm")
FIND_WRITABLE = (
    "find / -xdev "
    + " -o ".join(f"-path {path}" for path in AGENT_WRITABLE).join(["\\( ", " \\) -prune"])
    # a link to /dev/null (how Debian masks a service, e.g. sudo's) is "writable" only through /dev/null
    + " -o -writable ! -lname /dev/null -print 2>/dev/null; echo FIND-DONE"
)
PROBES = {
    "list_protected": "ls -la /protected; echo EXIT=$?",
    "read_scoring": "cat /protected/code/rebench/*/sandbox/score.py | head -c 200; echo EXIT=$?",
    "find_protected": "find /protected -maxdepth 3 2>&1 | head -n 5; echo EXIT=$?",
    "network": "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 80), timeout=5)\" 2>&1 | tail -n 1",
    "writable": FIND_WRITABLE,
    # Left behind on purpose: a spinner, a loop that keeps rewriting the workspace, and chains of processes that each
    # start their successor and exit (a pid read from /proc is gone before a signal sent to it arrives).
    "leave_processes": (
        "setsid nohup sh -c 'while true; do :; done' >/dev/null 2>&1 & "
        "setsid nohup sh -c 'while true; do date +%s%N > $HOME/workspace/.rewritten; sleep 0.05; done' "
        ">/dev/null 2>&1 & echo 'date +%s%N > $HOME/workspace/.hopped; sh \"$0\" &' > $HOME/hop.sh; "
        "for chain in $(seq 12); do setsid nohup sh $HOME/hop.sh >/dev/null 2>&1 & done; sleep 1; pgrep -u agent -c"
    ),
}


# Every file created or changed since Docker made the container (and wrote its /etc/hostname): a copy of the score log
# can only be one of them. The status-change time, which no tar extraction or `touch` sets back; reading only these
# spares a grep through the image's gigabytes of packages (optimize_llm_foundry's 6.7 GB stack).
CHANGED_IN_THE_CONTAINER = (
    "find / \\( -path /proc -o -path /sys -o -path /dev \\) -prune -o -type f -cnewer /etc/hostname -print0"
)


@scorer(metrics=[])
def container_probe():
    """Runs after rebench's final score: agent processes still alive, and any file holding the score log."""

    async def score(state: TaskState, target: Target) -> Score:
        alive = await sandbox().exec(["sh", "-c", "pgrep -u agent -c || true"])
        log_copies = await sandbox().exec(
            ["sh", "-c", f"{CHANGED_IN_THE_CONTAINER} | xargs -0 -r grep -lsF '{store_key('score_log')}' || true"]
        )
        return Score(
            value=0,
            metadata={"agent_processes": int(alive.stdout.strip() or 0), "score_log_files": log_copies.stdout.split()},
        )

    return score


@solver
def reference_result_written(result: Path) -> Solver:
    """Writes a reference's result (the files it adds to or changes in the prepared workspace) into the workspace."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await write_over_workspace({p.relative_to(result).as_posix(): p for p in result.rglob("*") if not p.is_dir()})
        return state

    return solve


@pytest.fixture
def reference(name, prepared_smoke_assets) -> Callable[[], Solver]:
    """How the eval installs the reference (module docstring); asked only when the eval runs."""
    environment = ENVIRONMENTS[name]
    if name not in REFERENCE_BUILT_ON_THE_HOST:
        return reference_solution
    return lambda: reference_result_written(cached_reference_result(environment, prepared_smoke_assets(environment)))


# The timed environment whose eval here measures its anchors at setup, in the container (rebench_inspect's
# measured_anchors, the same for every timed environment): optimize_kernel's runs take seconds. It runs alone on the
# host (`timed`). optimize_llm_foundry's would add four LLM Foundry runs; it keeps its built-in smoke anchors here and
# only the validity of its start and reference counts, so its eval runs beside the other lane (220 s that the host
# tiers waited out in a cold CI, 2026-12-06): the order of its two times, which needs a quiet machine, is checked on
# the host, alone (the contract test, and tests/optimize_llm_foundry/test_scoring.py::test_start_and_reference).
ANCHORS_MEASURED_IN_THE_CONTAINER = {"optimize_kernel"}


def run(name: str, reference: Callable[[], Solver], measured_anchors: bool = False) -> EvalLog:
    """The environment's smoke eval in Docker (module docstring). Only a test of the normalised scores needs a
    timed environment's anchors measured at setup; the others keep the fixed ones."""
    anchors = None if measured_anchors else fixed_smoke_anchors(ENVIRONMENTS[name])
    task = TASKS[name](scale="smoke", sandbox="docker", time_budget_hours=0.5, anchors=anchors)
    task.solver = chain(reference(), task.solver)
    task.scorer = [*task.scorer, container_probe()]
    calls = [tool_call(tool, **arguments) for tool, arguments, _ in shell_calls(name)]
    agent = scripted_agent([*calls, *(tool_call("bash", command=command) for command in PROBES.values())])
    [log] = eval(task, model=agent, display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    assert sample.error is None, sample.error
    return log


def final(log: EvalLog) -> Score:
    return log.samples[0].scores["rebench_scorer"]


@pytest.fixture(scope="session")
def evals() -> dict[str, EvalLog]:
    return {}


@pytest.mark.timed(only=ANCHORS_MEASURED_IN_THE_CONTAINER)
def test_start_scores_zero_and_the_reference_reaches_the_smoke_reference(name, smoke_image, evals, reference):
    """Setup scores the starting solution (the score log's first entry) before the reference solver installs the
    reference, which the final entry scores. This test runs the environment's eval itself, a timed environment's
    anchors measured at setup where ANCHORS_MEASURED_IN_THE_CONTAINER says so (alone on the host: `timed`); the other
    tests here read that eval."""
    environment = ENVIRONMENTS[name]
    smoke_image(environment)
    timed = environment.transform is Transform.LOG
    validity_only = timed and name not in ANCHORS_MEASURED_IN_THE_CONTAINER
    evals[name] = run(name, reference, measured_anchors=not validity_only)
    score = final(evals[name])
    start = score.metadata["score_log"][0]
    assert start["label"] == "start" and start["valid"], start
    assert score.metadata["valid"], score.explanation
    if validity_only:  # its times, taken beside the other lane's tests, say nothing (above)
        return
    # Timed environments (ln of a run time) measure CPU speed: on a shared 2-core machine a run took up to 7x the
    # anchor's time (normalised 0.5 with optimize_kernel's smoke anchors 56x apart); other metrics are stable.
    # CI saw the kernel's reference at 0.74999 against anchors measured minutes earlier on the same machine: the
    # reference's floor leaves a timed environment the same room as its start.
    tolerance = 0.6 if timed else 0.15
    assert math.isclose(start["normalised"], 0.0, abs_tol=tolerance), start
    assert score.value["normalised"] >= (1 - tolerance if timed else 0.75), score.value


def reference_then_probes(
    name: str, evals: dict[str, EvalLog], reference: Callable[[], Solver]
) -> tuple[EvalLog, list[str], dict[str, str]]:
    """The environment's eval (the anchors test's; run here with the fixed anchors when that test did not run), and
    the shell calls' and the probes' outputs."""
    if name not in evals:
        evals[name] = run(name, reference)
    log = evals[name]
    results = [message for message in log.samples[0].messages if message.role == "tool"]
    shells = len(shell_calls(name))
    assert len(results) == shells + len(PROBES), [message.text for message in log.samples[0].messages]
    probes = results[shells:]
    assert [result.error for result in probes] == [None] * len(PROBES)
    return log, [result.text for result in results[:shells]], dict(zip(PROBES, [r.text for r in probes], strict=True))


def test_python_and_pip_in_the_agents_shells_are_the_images_venv(name, smoke_image, evals, reference):
    smoke_image(ENVIRONMENTS[name])
    _, outputs, _ = reference_then_probes(name, evals, reference)
    for (_, arguments, expected), output in zip(shell_calls(name), outputs, strict=True):
        assert expected in output, (arguments, output)

    which, pip_version, interpreter_prefix = outputs[:3]
    venv = which.split("VENV=")[-1].strip()
    assert venv.startswith("/"), which
    assert which.split()[:3] == [f"{venv}/bin/python", f"{venv}/bin/python3", f"{venv}/bin/pip"], which
    assert f"from {venv}/" in pip_version, pip_version
    assert interpreter_prefix.strip() == venv, interpreter_prefix


def test_agent_cannot_reach_protected_network_or_scorer_and_leaves_no_process(name, smoke_image, evals, reference):
    smoke_image(ENVIRONMENTS[name])
    log, _, outputs = reference_then_probes(name, evals, reference)
    [sample] = log.samples
    for probe in ("list_protected", "read_scoring", "find_protected"):
        assert "Permission denied" in outputs[probe], outputs[probe]
    assert "#!/" not in outputs["read_scoring"] and "import" not in outputs["read_scoring"]
    assert "unreachable" in outputs["network"].lower() or "Errno" in outputs["network"], outputs["network"]
    writable = outputs["writable"].split()
    assert writable == ["FIND-DONE"], writable  # nothing root runs (interpreter, libraries, /protected) is writable
    assert int(outputs["leave_processes"].split()[-1]) >= 2
    probe = sample.scores["container_probe"].metadata
    assert probe["agent_processes"] == 0  # stopped before the final score
    assert final(log).metadata["agent_processes_surviving_the_stop"] == []
    assert probe["score_log_files"] == []  # the score log lives in Inspect's store, on the host
    assert final(log).metadata["valid"], final(log).explanation
