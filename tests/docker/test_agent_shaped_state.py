"""State the agent shapes cannot turn its score into an errored sample (issue 46): every scoring run ends in a verdict.

A red team found four routes, each reproduced here in a real smoke eval in Docker, with the generated sandbox:
1. memory the agent leaves behind for the final stop: System V shared memory filled and detached (no process shows
   it) and the tmpfs folders filled, then nothing of the agent's runs. Before the fix the final stop's own staging
   was OOM-killed (`ScoringInfrastructureError`);
2. the agent's code at scoring time pins memory the same way in the scoring service, so the OOM killer picks root's
   scoring program (exit 137): the sample errored at an intermediate call;
3. a workspace tree the copy into the scoring service could not walk: 1,100 nested folders (`RecursionError`), a path
   over PATH_MAX (`ENAMETOOLONG`);
4. a workspace of 150,000 empty files: it passed the copy's own limit, and the steps after it ran past the harness's
   command timeout (`SandboxTimeoutError`).
optimize_kernel's copy into its scoring service stands for every environment that scores apart (as in
test_exhaustion.py), restricted_mlm's exporter for the agent's code at scoring time; scaling_law, the cheapest of the
environments that score in the agent's container, stands for them in route 1.
"""

import pytest

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime import scoring
from rebench_inspect.testing.scripted import tool_call

from .test_exhaustion import entries, scored_by_an_agent_that_ran

pytestmark = [pytest.mark.docker]

# Fills System V shared memory, 64 MiB a segment, detaching each (only /proc/sysvipc shows it), up to the container's
# whole 8 GiB: before the fix the out-of-memory killer ended it there and the segments stayed, so the next root process
# to need memory met the killer in turn. With `kernel.shm_rmid_forced` a detached segment is freed at once, and it
# prints how much is still held.
PIN_SHARED_MEMORY = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmget.argtypes = [ctypes.c_int, ctypes.c_size_t, ctypes.c_int]
libc.shmat.restype = ctypes.c_void_p
chunk, made = 64 << 20, 0
while made < 8 << 30:
    segment = libc.shmget(0, chunk, 0o1600)
    address = libc.shmat(segment, None, 0) if segment >= 0 else None
    if address in (None, ctypes.c_void_p(-1).value):
        break
    ctypes.memset(address, 1, chunk)
    libc.shmdt(ctypes.c_void_p(address))
    made += chunk
held = sum(int(line.split()[3]) for line in open("/proc/sysvipc/shm").read().splitlines()[1:])
print("HELD", held >> 20)
"""
FILL_MEMORY_FOLDERS = "; ".join(
    f"dd if=/dev/zero of={folder}/filler bs=1M 2>/dev/null" for folder in ("/dev/shm", "/tmp", "/var/tmp")
)
LEAVE_MEMORY_BEHIND = f"python3 -c '{PIN_SHARED_MEMORY}'; {FILL_MEMORY_FOLDERS}; echo LEFT"
DEEP_TREE = "python3 -c \"import os\nfor _ in range(1100): os.mkdir('d'); os.chdir('d')\" && echo DEEP"
LONG_PATH = (
    "python3 -c \"import os\nfd = os.open('.', os.O_RDONLY)\nfor _ in range(20):\n"
    "    os.mkdir('n' * 250, dir_fd=fd); fd = os.open('n' * 250, os.O_RDONLY, dir_fd=fd)\n\" && echo LONG"
)
MANY_FILES = (
    "python3 -c \"import os\nos.mkdir('many')\nfor i in range(150000): open(f'many/{i}', 'w').close()\" && echo MANY"
)
CLEAN = "rm -rf d n* many && echo CLEAN"
# restricted_mlm's model, as the scorer's exporter exits, pins memory in the scoring service from a process that then
# exits too (route 2): before the fix, root's evaluation step that followed met the out-of-memory killer.
PIN_AT_EXIT = f"""
import atexit as _atexit, subprocess as _subprocess, sys as _sys
_atexit.register(_subprocess.run, [_sys.executable, "-c", {PIN_SHARED_MEMORY!r}])
"""
PINNING_MODEL = f"cat >> solution/model.py <<'EOF'\n{PIN_AT_EXIT}\nEOF\necho PINNING"


def held_mib(printed: str) -> int:
    """What LEAVE_MEMORY_BEHIND found still held in System V shared memory after it detached every segment."""
    return int(printed.split("HELD", 1)[1].split()[0])


# CI's Docker lanes pick each environment's tests by name (`-k ENV`): each test names its environment.
@pytest.mark.parametrize("name", ["optimize_kernel"])
def test_agent_shaped_trees_end_in_verdicts_where_scoring_runs_apart(name, smoke_image):
    smoke_image(ENVIRONMENTS[name])
    assert ENVIRONMENTS[name].isolated_scoring
    sample, printed = scored_by_an_agent_that_ran(
        name,
        [
            tool_call("bash", command=DEEP_TREE),
            tool_call("score"),  # route 3: too deep
            tool_call("bash", command=f"{CLEAN} && {LONG_PATH}"),
            tool_call("score"),  # route 3: a path past PATH_MAX
            tool_call("bash", command=f"{CLEAN} && {MANY_FILES}"),
            tool_call("score"),  # route 4: too many entries
            tool_call("bash", command=f"{CLEAN} && {LEAVE_MEMORY_BEHIND}"),  # route 1: then the final stop and score
        ],
        # Open (issue 47): Inspect's checkpoint archives the agent's home with tar, which took 515 s over the deep
        # tree here (load 2-3, 2026-12-07); this test is about the copy into scoring.
        checkpoint_minutes=0,
    )
    log = [(entry["label"], entry["valid"]) for entry in entries(sample)]
    assert log == [("start", True), ("agent", False), ("agent", False), ("agent", False), ("final", True)], log
    bounds = ["nests folders more than", "holds a path longer than", "holds more than 100000 files"]
    for entry, bound in zip(entries(sample)[1:4], bounds, strict=True):
        assert entry["message"].startswith("the workspace could not be copied for scoring"), entry["message"]
        assert bound in entry["message"], entry["message"]
    assert "LEFT" in printed[-1] and held_mib(printed[-1]) == 0, printed[-1]
    # the sample's messages quote none of the agent's names
    assert not any("n" * 250 in message.text for message in sample.messages if message.role == "tool")


@pytest.mark.parametrize("name", ["restricted_mlm"])
def test_code_that_pins_memory_at_scoring_time_ends_in_a_verdict(name, smoke_image):
    smoke_image(ENVIRONMENTS[name])
    sample, printed = scored_by_an_agent_that_ran(name, [tool_call("bash", command=PINNING_MODEL), tool_call("score")])
    assert "PINNING" in printed[0], printed[0]
    # each segment was freed as it was detached: the model exports and evaluates as the starting one does
    log = [(entry["label"], entry["valid"]) for entry in entries(sample)]
    assert log == [("start", True), ("agent", True), ("final", True)], entries(sample)


@pytest.mark.parametrize("name", ["scaling_law"])
def test_memory_left_behind_ends_in_verdicts_where_scoring_runs_in_the_agents_container(name, smoke_image):
    smoke_image(ENVIRONMENTS[name])
    assert not ENVIRONMENTS[name].isolated_scoring
    sample, printed = scored_by_an_agent_that_ran(
        name,
        # route 1, with an intermediate scoring run beside the memory left (root's program in the same container)
        [tool_call("bash", command=LEAVE_MEMORY_BEHIND), tool_call("score")],
    )
    assert "LEFT" in printed[0] and held_mib(printed[0]) == 0, printed[0]
    log = [(entry["label"], entry["valid"]) for entry in entries(sample)]
    assert log == [("start", True), ("agent", True), ("final", True)], entries(sample)
    reclaimed = sample.scores["rebench_scorer"].metadata["agent_leftovers_reclaimed"]
    assert reclaimed["memory_files_removed"] >= 3, reclaimed


@pytest.mark.parametrize("name", ["optimize_kernel"])
def test_a_scoring_step_that_fails_after_the_agent_acted_is_checked_where_scoring_runs(name, smoke_image, monkeypatch):
    """The harness's check of itself in a real scoring service: the runner user's processes stopped and its leftovers
    reclaimed there, the starting workspace kept at setup scored in a copy of its own; the agent's call that failed
    is then an invalid entry, and the next run works."""
    smoke_image(ENVIRONMENTS[name])
    copy_submission, calls = scoring.copy_submission, []

    async def failing_at_the_agents_call(environment, layout):
        calls.append(environment.name)
        if len(calls) == 2:  # the start's copy, then the agent's: a stand-in for a step the agent's state broke
            raise scoring.ScoringInfrastructureError("the copy failed")
        return await copy_submission(environment, layout)

    monkeypatch.setattr(scoring, "copy_submission", failing_at_the_agents_call)
    sample, _ = scored_by_an_agent_that_ran(name, [tool_call("score")])
    log = [(entry["label"], entry["valid"]) for entry in entries(sample)]
    assert log == [("start", True), ("agent", False), ("final", True)], entries(sample)
    assert entries(sample)[1]["message"] == scoring.SUBMISSION_BROKE_SCORING
    assert entries(sample)[1]["details"]["harness_check"] == "passed"
