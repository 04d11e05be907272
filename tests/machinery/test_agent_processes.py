"""The agent's processes, by user: the final stop ends all of them, however they fork, and a quarantined scoring run
freezes them, continues them afterwards and kills only those the runner's code could have sent data to.

Needs root and `useradd` (throwaway users stand for the image's `agent`, the trainer the agent can run as through
sudo, and `rebench-runner`); their processes run the system's /usr/bin/python3 and /bin/sh, which every user may
run. The Docker tier runs the same defences inside the images (tests/docker/).
"""

import json
import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from rebench.environments import ENVIRONMENTS
from rebench.sandbox_lib import Quarantine, isolation, leftovers, reached_the_agent
from rebench.sandbox_lib.users import processes_of
from tests.conftest import add_throwaway_user
from tests.scoring_program import run_final_stop, run_users_command

SYSTEM_PYTHON = "/usr/bin/python3"
SANDBOXES = Path(__file__).resolve().parents[2] / "sandboxes"


@pytest.fixture(scope="module")
def users() -> Iterator[SimpleNamespace]:
    """Three throwaway users: the agent, another user it can run processes as (the trainer), the runner."""
    if os.geteuid() != 0 or not shutil.which("useradd") or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip("needs root, useradd and /usr/bin/python3")
    stem = f"rbp{os.getpid() % 100000}"
    names = {role: f"{stem}{role[0]}" for role in ("agent", "trainer", "runner")}
    for name in names.values():
        add_throwaway_user(name)
    try:
        yield SimpleNamespace(**names, uids={role: pwd.getpwnam(name).pw_uid for role, name in names.items()})
    finally:
        for name in names.values():
            subprocess.run(["pkill", "-KILL", "-u", name], check=False, capture_output=True)
            subprocess.run(["userdel", name], check=False, capture_output=True)


@pytest.fixture
def world() -> Iterator[Path]:
    """A folder every user can read and enter (pytest's own tmp_path is root-only)."""
    folder = Path(tempfile.mkdtemp(prefix="rebench-processes-"))
    os.chmod(folder, 0o777)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def spawn(user: str, argv: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen(
        argv,
        user=user,
        group=user,
        extra_groups=[],
        cwd=cwd,
        start_new_session=True,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def wait_for(condition, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


# Each instance starts its successor and exits: a pid read from /proc is gone before a signal reaches it.
HOP = '#!/bin/sh\nsh "$0" &\n'


def test_the_final_stop_ends_fork_loops_and_every_user_the_agent_runs_as(users, world, toy_environment, tmp_path):
    (world / "hop.sh").write_text(HOP)
    for _ in range(4):
        spawn(users.agent, ["sh", str(world / "hop.sh")], world)
    spawn(users.agent, ["sh", "-c", "while :; do date > /dev/null; done"], world)
    spawn(users.trainer, ["sh", "-c", "while :; do sleep 0.1; done"], world)  # what sudo started as the trainer
    time.sleep(1)
    assert processes_of([users.uids["agent"]]) and processes_of([users.uids["trainer"]])
    environment = toy_environment.model_copy(update={"agent_extra_users": (users.trainer,)})
    started = time.monotonic()
    completed = run_final_stop(environment, users.agent, tmp_path / "protected")
    assert completed.returncode == 0, completed.stderr[-2000:]
    report = json.loads(completed.stdout)
    assert {key: report[key] for key in ("users", "survivors")} == {
        "users": [users.agent, users.trainer],
        "survivors": [],
    }
    assert not processes_of([users.uids["agent"], users.uids["trainer"]])
    assert time.monotonic() - started < 60


# Memory that outlives its process: a System V segment filled, detached and left (no process shows it), a file in a
# tmpfs folder; then a process that exits. What the red team left behind before the final stop's staging (issue 46).
LEAVE_MEMORY_BEHIND = """
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
size = 8 * 1024 * 1024
segment = libc.shmget(0, size, 0o1000 | 0o600)  # IPC_PRIVATE, IPC_CREAT
address = libc.shmat(segment, None, 0)
ctypes.memset(address, 1, size)
libc.shmdt(ctypes.c_void_p(address))
with open(sys.argv[1], "wb") as left:
    left.write(b"x" * size)
print(segment)
"""


def test_the_final_stop_reclaims_the_memory_the_agent_left_behind(users, world, toy_environment, tmp_path):
    left_file = Path("/dev/shm") / f"rebench-left-{os.getpid()}"
    made = subprocess.run(
        [SYSTEM_PYTHON, "-c", LEAVE_MEMORY_BEHIND, str(left_file)],
        user=users.agent,
        group=users.agent,
        extra_groups=[],
        cwd=world,
        capture_output=True,
        text=True,
        check=True,
    )
    segment = int(made.stdout)
    segments = lambda: [item.id for item in leftovers.sysv_objects() if item.kind == "shm"]  # noqa: E731
    try:
        assert segment in segments() and left_file.exists()  # nothing of the agent's runs, and both are still held
        completed = run_final_stop(toy_environment, users.agent, tmp_path / "protected")
        assert completed.returncode == 0, completed.stderr[-2000:]
        reclaimed = json.loads(completed.stdout)["reclaimed"]
        assert segment not in segments() and not left_file.exists()
        assert reclaimed["sysv_objects_removed"] >= 1 and reclaimed["memory_files_removed"] >= 1
    finally:
        left_file.unlink(missing_ok=True)
        subprocess.run(["ipcrm", "-m", str(segment)], check=False, capture_output=True)


# Stops (and would kill) every process it may signal, over and over: the stop's own sender must not be among them.
STOP_EVERYTHING = """
import os, signal
while True:
    try:
        os.kill(-1, signal.SIGSTOP)
    except OSError:
        pass
"""


def test_the_agent_cannot_stop_the_stop(users, world, toy_environment, tmp_path):
    for _ in range(2):
        spawn(users.agent, [SYSTEM_PYTHON, "-c", STOP_EVERYTHING], world)
    time.sleep(0.5)
    completed = run_final_stop(toy_environment, users.agent, tmp_path / "protected")
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert json.loads(completed.stdout)["survivors"] == []
    assert not processes_of([users.uids["agent"]])


def test_every_sudo_rule_of_an_image_names_a_declared_agent_user():
    """The final stop knows the users the agent can run as from the spec: each image's sudo rules must agree."""
    for dockerfile in SANDBOXES.glob("*/Dockerfile"):
        targets = set(re.findall(r"agent\s+ALL\s*=\s*\(([^)]+)\)", dockerfile.read_text()))
        if targets:
            declared = set(ENVIRONMENTS[dockerfile.parent.name].agent_extra_users)
            assert targets <= declared, f"{dockerfile}: sudo lets the agent run as {targets}; the spec says {declared}"


# ------------------------------------------------------------------------------------------------ quarantine
# A training run in the background: it counts, and holds what such runs hold (a socket pair between workers, a
# listener of its own); the runner never writes to it, so scoring must leave it running.
TRAINING = """
import socket, sys, time
pair = socket.socketpair()
board = socket.socket(); board.bind(("127.0.0.1", 0)); board.listen()
step = 0
while True:
    step += 1
    open(sys.argv[1], "w").write(str(step))
    time.sleep(0.01)
"""
# Receivers the runner's code finds and writes to: a TCP listener, a UDP socket, an abstract Unix listener.
RECEIVERS = """
import socket, sys, time
tcp = socket.socket(); tcp.bind(("127.0.0.1", 0)); tcp.listen()
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); udp.bind(("127.0.0.1", 0))
unix = socket.socket(socket.AF_UNIX); unix.bind("\\0" + sys.argv[2]); unix.listen()
open(sys.argv[1], "w").write(f"{tcp.getsockname()[1]} {udp.getsockname()[1]}")
time.sleep(600)
"""
SENDER = """
import socket, sys
tcp_port, udp_port = map(int, open(sys.argv[1]).read().split())
socket.create_connection(("127.0.0.1", tcp_port)).sendall(b"held-out")
socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b"held-out", ("127.0.0.1", udp_port))
unix = socket.socket(socket.AF_UNIX); unix.connect("\\0" + sys.argv[2]); unix.sendall(b"held-out")
"""


def progress(path: Path) -> int:
    try:
        return int(path.read_text() or 0)
    except (OSError, ValueError):
        return 0


def test_a_quarantine_freezes_the_agent_then_continues_all_it_did_not_have_to_kill(users, world, monkeypatch):
    monkeypatch.setattr(isolation, "_search_roots", lambda: (str(world),))  # the filesystem sweep, kept to the test
    counter, ports, name = world / "steps", world / "ports", f"rebench-test-{os.getpid()}"
    training = spawn(users.agent, [SYSTEM_PYTHON, "-c", TRAINING, str(counter)], world)
    receivers = spawn(users.agent, [SYSTEM_PYTHON, "-c", RECEIVERS, str(ports), name], world)
    try:
        wait_for(lambda: progress(counter) > 0 and ports.exists() and ports.read_text())
        with Quarantine((users.agent,), users.runner) as quarantine:
            assert state(training.pid) == state(receivers.pid) == "T"
            frozen_at = progress(counter)
            sender = subprocess.run(
                [SYSTEM_PYTHON, "-c", SENDER, str(ports), name],
                user=users.runner,
                group=users.runner,
                extra_groups=[],
                cwd=world,
                capture_output=True,
                text=True,
                timeout=30,
            )
            assert sender.returncode == 0, sender.stderr
            time.sleep(0.3)
            assert progress(counter) == frozen_at
            report = quarantine.sweep()
        assert reached_the_agent(report)
        assert len(report["agent_sockets_written_by_runner"]) == 3
        assert report["agent_processes_killed"] == [receivers.pid]
        wait_for(lambda: state(receivers.pid) in ("gone", "Z"))
        wait_for(lambda: progress(counter) > frozen_at)  # continued, not killed
    finally:
        for process in (training, receivers):
            process.kill()
            process.wait()


def test_a_quarantine_that_nothing_crossed_kills_nothing(users, world, monkeypatch):
    monkeypatch.setattr(isolation, "_search_roots", lambda: (str(world),))
    counter = world / "steps"
    training = spawn(users.agent, [SYSTEM_PYTHON, "-c", TRAINING, str(counter)], world)
    try:
        wait_for(lambda: progress(counter) > 0)
        with Quarantine((users.agent,), users.runner) as quarantine:
            report = quarantine.sweep()
        assert not reached_the_agent(report) and report["agent_processes_killed"] == []
        before = progress(counter)
        wait_for(lambda: progress(counter) > before)
    finally:
        training.kill()
        training.wait()


COUNTER = "import sys, time\nwhile True:\n    open(sys.argv[1], 'a').write('.')\n    time.sleep(0.05)\n"


def test_a_scoring_service_run_freezes_fork_loops_and_continues_exactly_what_it_froze(
    users, world, toy_environment, tmp_path
):
    """The host's pause around a run in the scoring service (`freeze`, then `resume`) holds a fork loop still (no
    new process appears while frozen) and then continues the agent's work."""
    counter = world / "counter"
    (world / "hop.sh").write_text(HOP)
    spawn(users.agent, ["sh", str(world / "hop.sh")], world)
    spawn(users.agent, [SYSTEM_PYTHON, "-c", COUNTER, str(counter)], world)
    wait_for(lambda: counter.exists() and counter.stat().st_size > 0)
    protected = tmp_path / "protected"
    try:
        frozen = run_users_command(toy_environment, protected, ["freeze", users.agent]).stdout
        held = processes_of([users.uids["agent"]])
        assert held and all(status in ("T", "t", "Z") for status in held.values())
        size = counter.stat().st_size
        time.sleep(0.5)
        assert processes_of([users.uids["agent"]]).keys() <= held.keys()  # no fork got through
        assert counter.stat().st_size == size
        assert run_users_command(toy_environment, protected, ["resume", "--frozen", frozen.strip()]).returncode == 0
        wait_for(lambda: counter.stat().st_size > size)
    finally:
        run_users_command(toy_environment, protected, ["stop", users.agent])
