"""Scoring apart from the agent (issue 21): code that scoring runs on held-out inputs as the runner user cannot hand
them back to the agent, through channels a sweep of the agent's container never closed.

The agent prepares three channels outside its workspace, then writes a scaffold (`solution.py`) that, run by the
scorer on the held-out problems, uses them: it renames files of a folder the agent owns and anyone may write to
after the problems, appends the problems to an agent file that a POSIX ACL lets the runner user write, and reads
files of the agent's chosen after the problems (their access times change). After the score, the agent reads every
channel back. While scoring ran in the agent's container each channel carried the held-out problem names out (shown
on the code before `isolated_scoring`); scoring in a service of its own, the scaffold finds none of the agent's
files, and the agent sees its channels as it left them.
"""

import json

import pytest
from inspect_ai import eval

from rebench.environments import ENVIRONMENTS, TASKS
from tests.conftest import scripted_agent, tool_call

pytestmark = pytest.mark.docker

ENVIRONMENT = ENVIRONMENTS["rust_codecontests"]
HOME = "/home/agent"
BITS = 16  # files the scaffold may read: which ones it read says something about the problems

PREPARE_CHANNELS = f"""
import os, pwd, struct
home = "{HOME}"
os.chmod(home, 0o755)
# 1. a folder anyone may write to, with files of the agent's in it: anyone may rename them
drop = f"{{home}}/drop"
os.makedirs(drop, exist_ok=True)
os.chmod(drop, 0o777)
for slot in range(8):
    with open(f"{{drop}}/slot-{{slot}}", "w") as f:
        f.write("slot")
# 2. a file only the agent may write by its mode bits, and the runner user by a POSIX ACL
acl = f"{{home}}/acl.txt"
with open(acl, "w") as f:
    f.write("acl:")
os.chmod(acl, 0o600)
runner, unset = pwd.getpwnam("rebench-runner").pw_uid, 0xFFFFFFFF
# user::rw- user:rebench-runner:rw- group::--- mask::rw- other::---
entries = [(0x01, 6, unset), (0x02, 6, runner), (0x04, 0, unset), (0x10, 6, unset), (0x20, 0, unset)]
os.setxattr(acl, "system.posix_acl_access", struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries))
# 3. files whose access time says whether anyone read them (set in the past: relatime then records a read)
bits = f"{{home}}/bits"
os.makedirs(bits, exist_ok=True)
os.chmod(bits, 0o755)
for bit in range({BITS}):
    path = f"{{bits}}/{{bit}}"
    with open(path, "w") as f:
        f.write("bit")
    os.chmod(path, 0o644)
    os.utime(path, (946684800, os.stat(path).st_mtime))
print("channels ready")
"""

SCAFFOLD = f'''
import os, sys

HOME = "{HOME}"


async def generate_solution(client, semaphore, problem):
    name = problem["name"]
    used = []
    slots = sorted(os.listdir(HOME + "/drop")) if os.path.isdir(HOME + "/drop") else []
    free = [slot for slot in slots if slot.startswith("slot-")]
    if free:
        os.rename(HOME + "/drop/" + free[0], HOME + "/drop/" + name)
        used.append("rename")
    try:
        with open(HOME + "/acl.txt", "a") as f:
            f.write(name + ";")
        used.append("acl")
    except OSError:
        pass
    try:
        with open(HOME + "/bits/" + str(sum(map(ord, name)) % {BITS})) as f:
            f.read()
        used.append("atime")
    except OSError:
        pass
    print("scaffold ran on a held-out problem; channels it could use:", used or "none", file=sys.stderr)
    return "fn main() {{}}"
'''

READ_BACK = (
    f"echo DROP; ls {HOME}/drop; echo ACL; cat {HOME}/acl.txt; echo; echo BITS; "
    f"stat -c '%n %X' {HOME}/bits/* | awk '$2 != 946684800'; echo END"
)


def held_out_names() -> list[str]:
    records = json.loads((ENVIRONMENT.sandbox_dir / "smoke_problems.json").read_text())
    return [record["name"] for record in records if record["split"] == "test"]


def test_scoring_code_cannot_hand_held_out_problems_back_to_the_agent(smoke_image):
    smoke_image(ENVIRONMENT)
    agent = scripted_agent(
        [
            tool_call("python", code=PREPARE_CHANNELS),
            tool_call("python", code=f"open('solution.py', 'w').write({SCAFFOLD!r})"),
            tool_call("score"),
            tool_call("bash", command=READ_BACK),
        ]
    )
    task = TASKS["rust_codecontests"](scale="smoke", sandbox="docker", time_budget_hours=0.5)
    [log] = eval(task, model=agent, display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    assert sample.error is None, sample.error
    outputs = [message.text for message in sample.messages if message.role == "tool"]
    assert "channels ready" in outputs[0], outputs[0]
    read_back = outputs[3]
    assert read_back.rstrip().endswith("END"), read_back
    # the scaffold did run on the held-out problems in the scoring run the agent asked for
    [agent_entry] = [
        entry for entry in sample.scores["rebench_scorer"].metadata["score_log"] if entry["label"] == "agent"
    ]
    # (what the scaffold printed is never kept: the verdict counts the programs it returned, one per problem)
    assert agent_entry["details"]["programs_returned"] == len(held_out_names()), agent_entry
    drop = read_back.split("DROP", 1)[1].split("ACL", 1)[0].split()
    acl = read_back.split("ACL", 1)[1].split("BITS", 1)[0].strip()
    bits_read = read_back.split("BITS", 1)[1].split("END", 1)[0].split()
    names = held_out_names()
    channels = {
        "rename in a folder anyone may write to": [entry for entry in drop if entry in names],
        "a POSIX ACL on an agent file": [name for name in names if name in acl],
        "access times of the agent's files": bits_read,
    }
    assert {channel: seen for channel, seen in channels.items() if seen} == {}, read_back
    assert drop == [f"slot-{slot}" for slot in range(8)] and acl == "acl:", read_back
