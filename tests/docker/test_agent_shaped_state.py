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
from rebench_inspect.testing.scripted import tool_call

from .test_exhaustion import entries, scored_by_an_agent_that_ran

pytestmark = [pytest.mark.docker]

IN_THE_AGENTS_CONTAINER = "scaling_law"

# Fills System V shared memory, 64 MiB a segment, detaching each (only /proc/sysvipc shows it), up to the container's
# whole 8 GiB (before the fix the out-of-memory killer ended it there, the segments left behind); prints how much is
# still held if it lives. With `kernel.shm_rmid_forced` a detached segment is freed at once.
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
# restricted_mlm's model pins memory as the scorer's exporter imports it, in the scoring service (route 2): then root's
# evaluation step, the largest process, met the out-of-memory killer.
PINNING_MODEL = (
    f"cat > /tmp/pin.py <<'EOF'\n{PIN_SHARED_MEMORY}\nEOF\n"
    "cat /tmp/pin.py solution/model.py > /tmp/model.py && mv /tmp/model.py solution/model.py && echo PINNING"
)


def held_mib(printed: str) -> int:
    """What LEAVE_MEMORY_BEHIND found still held in System V shared memory after it detached every segment."""
    return int(printed.split("HELD", 1)[1].split()[0])


def test_agent_shaped_trees_end_in_verdicts_where_scoring_runs_apart(smoke_image):
    smoke_image(ENVIRONMENTS["optimize_kernel"])
    sample, printed = scored_by_an_agent_that_ran(
        "optimize_kernel",
        [
            tool_call("bash", command=DEEP_TREE),
            tool_call("score"),  # route 3: too deep
            tool_call("bash", command=f"{CLEAN} && {LONG_PATH}"),
            tool_call("score"),  # route 3: a path past PATH_MAX
            tool_call("bash", command=f"{CLEAN} && {MANY_FILES}"),
            tool_call("score"),  # route 4: too many entries
            tool_call("bash", command=f"{CLEAN} && {LEAVE_MEMORY_BEHIND}"),  # route 1: then the final stop and score
        ],
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


def test_code_that_pins_memory_at_scoring_time_ends_in_a_verdict(smoke_image):
    smoke_image(ENVIRONMENTS["restricted_mlm"])
    sample, printed = scored_by_an_agent_that_ran(
        "restricted_mlm", [tool_call("bash", command=PINNING_MODEL), tool_call("score")]
    )
    assert "PINNING" in printed[0], printed[0]
    # each segment was freed as it was detached: the model exports and evaluates as the starting one does
    log = [(entry["label"], entry["valid"]) for entry in entries(sample)]
    assert log == [("start", True), ("agent", True), ("final", True)], entries(sample)


def test_memory_left_behind_ends_in_verdicts_where_scoring_runs_in_the_agents_container(smoke_image):
    smoke_image(ENVIRONMENTS[IN_THE_AGENTS_CONTAINER])
    sample, printed = scored_by_an_agent_that_ran(
        IN_THE_AGENTS_CONTAINER,
        # route 1, with an intermediate scoring run beside the memory left (root's program in the same container)
        [tool_call("bash", command=LEAVE_MEMORY_BEHIND), tool_call("score")],
    )
    assert "LEFT" in printed[0] and held_mib(printed[0]) == 0, printed[0]
    log = [(entry["label"], entry["valid"]) for entry in entries(sample)]
    assert log == [("start", True), ("agent", True), ("final", True)], entries(sample)
    reclaimed = sample.scores["rebench_scorer"].metadata["agent_leftovers_reclaimed"]
    assert reclaimed["memory_files_removed"] >= 3, reclaimed
