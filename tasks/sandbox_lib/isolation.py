"""Keep everything the agent's code writes during scoring away from the agent (Linux; threat model of every channel:
docs/agent-processes-threat-model.md).

While scoring runs, the agent's code (rust_codecontests' module and the programs it judges, optimize_llm_foundry's
finetune.sh, optimize_kernel's worker) runs as a dedicated runner user, never the agent's, in private folders.
What it could still do is write somewhere the agent reads: a world-writable file or FIFO the agent prepared, a
socket an agent process can receive on, a SysV IPC object, or a file of its own made readable on purpose.
`Quarantine` closes those channels and leaves the agent's own work alone:

- on entry, every process of the agent's users is frozen (SIGSTOP, to the whole user at once: `users.freeze`), so
  nothing of the agent's runs concurrently with its code or reads what it sends before the sweep;
- on `sweep()`, after the module and every program are dead: every process of the runner user is killed (the same
  way), every file it owns is removed (whole filesystem, /proc and /sys aside), agent-owned files that others may
  write and that changed while the agent was frozen are removed (the run is then invalid), and SysV IPC objects of
  either user that others may write are removed. Sockets: an agent process is killed only where data could have
  reached it from the runner (`written_sockets`): a listener with a connection queued during the run, a socket that
  got connected or received data although it had no established peer, or a named Unix datagram socket (whose
  queue length cannot show a zero-length datagram carrying descriptors); the run is invalid when anything was
  queued. Where such a socket has no holder this process can see (its descriptor passed in a message, or its
  holder hides its open files), the agent processes that could hold it are killed too;
- on exit, every agent process that was frozen is continued (SIGCONT): a training run left in the background
  carries on.

Without a dedicated runner user (the local sandbox, host tests) none of this applies: there is no second user to
keep apart, and the agent's processes are this process's own.
"""

import os
import pwd
import signal
import stat
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from .leftovers import remove_sysv_objects
from .users import freeze, kill_everything, processes_of, resume, signal_processes, uids_of

# Trees never searched for leftovers: kernel views, not files anyone wrote. /dev is searched only at /dev/shm.
SKIPPED_TREES = ("/proc", "/sys", "/dev")
SEARCHED_UNDER_DEV = ("/dev/shm", "/dev/mqueue")
# Timestamps are coarse (a jiffy); files changed later than this after the freeze are the runner's doing.
TIMESTAMP_MARGIN_S = 0.05
RUNNER_KILL_DEADLINE_S = 30.0


# The dedicated user scoring programs run the agent's code as in containers (created by the Dockerfiles of the
# environments that use it): then no process the agent left running can read what that code is given, trace it,
# or rewrite its results.
RUNNER_USER = "rebench-runner"


def runner_user(run_as: str | None) -> str | None:
    """Who runs the agent's code: the runner user where the image has one, else `run_as` (None on the host)."""
    if run_as is None:
        return None
    try:
        pwd.getpwnam(RUNNER_USER)
        return RUNNER_USER
    except KeyError:
        return run_as


def dedicated_runner(agent_users: Sequence[str], runner: str | None) -> int | None:
    """The runner's uid when it is a user apart from the agent's users and root; else None (nothing to keep apart)."""
    runner_uids, agent_uids = uids_of([runner]), uids_of(agent_users)
    if not runner_uids or not agent_uids or runner_uids[0] in agent_uids:
        return None
    return runner_uids[0]


def _skipped(top: str) -> bool:
    """Whether `top` is a kernel view whose entries are never searched (/dev is searched only below its folders in
    SEARCHED_UNDER_DEV)."""
    return (
        top != "/"
        and any(top == tree or top.startswith(tree + "/") for tree in SKIPPED_TREES)
        and not any(top == folder or top.startswith(folder + "/") for folder in SEARCHED_UNDER_DEV)
    )


def _walk(roots: tuple[str, ...] = ("/",)):
    """(path, lstat) of every file and directory under `roots`, deepest first, links never followed. Without
    recursion: the runner's code may nest folders past Python's recursion limit (os.walk recurses in Python 3.11);
    a folder whose path is too long to open is passed over, never an error."""
    for root in roots:
        searched, pending = [], [root]
        while pending:  # folders in pre-order: each after its parent
            top = pending.pop()
            leads_on = any(folder.startswith(top.rstrip("/") + "/") for folder in SEARCHED_UNDER_DEV)
            if _skipped(top) and not leads_on:
                continue
            if not _skipped(top):
                searched.append(top)
            try:
                with os.scandir(top) as entries:
                    pending.extend(entry.path for entry in entries if entry.is_dir(follow_symlinks=False))
            except OSError:
                continue
        for top in reversed(searched):  # children before their parents
            try:
                names = os.listdir(top)
            except OSError:
                continue
            for name in names:
                path = os.path.join(top, name)
                try:
                    yield path, os.lstat(path)
                except OSError:
                    continue


def _search_roots() -> tuple[str, ...]:
    return ("/", *(d for d in SEARCHED_UNDER_DEV if os.path.isdir(d)))


def _remove(path: str, info: os.stat_result) -> bool:
    try:
        if stat.S_ISDIR(info.st_mode):
            os.rmdir(path)  # bottom-up walk: its files are gone already (or it is not ours to empty)
        else:
            os.unlink(path)
        return True
    except OSError:
        return False


def remove_files_of(uid: int) -> list[str]:
    """Remove every file and directory owned by `uid`; returns their paths."""
    removed = []
    for path, info in _walk(_search_roots()):
        if info.st_uid == uid and _remove(path, info):
            removed.append(path)
    return removed


def remove_written_by_others(uid: int, since: float) -> list[str]:
    """Remove files of `uid` that others may write and that changed after `since` (the agent was stopped)."""
    removed = []
    for path, info in _walk(_search_roots()):
        if stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode) or info.st_uid != uid:
            continue
        if info.st_mode & stat.S_IWOTH and max(info.st_mtime, info.st_ctime) > since and _remove(path, info):
            removed.append(path)
    return removed


# /proc/net tables: file → (column of the state, column of the queue (a hex "tx:rx" pair or a decimal byte count),
# column of the inode). TCP's queue is the listen backlog for a listener, else the unread bytes.
INET_TABLES = ("tcp", "tcp6", "udp", "udp6", "udplite", "udplite6", "raw", "raw6", "icmp", "icmp6")
COUNTED_TABLES = {"netlink": 4, "packet": 6}  # column of the bytes waiting to be read (the inode is the last one)
TCP_ESTABLISHED, TCP_LISTEN = "01", "0A"
UNIX_LISTENING = 0x10000  # __SO_ACCEPTCON in the Flags column
UNIX_DATAGRAM = "0002"
UNIX_NO_SOCKET = "0"  # inode of a connection queued on a listener and not yet accepted (it shares the listener's name)


class SocketState(NamedTuple):
    table: str
    state: str
    queued: int  # TCP listener: connections waiting; Unix listener: same, counted by name; others: bytes unread
    name: str = ""  # Unix: the bound name ("" when unnamed)
    datagram: bool = False


def _rows(table: str) -> list[list[str]]:
    try:
        return [line.split() for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]]
    except OSError:
        return []


def socket_states() -> dict[int, SocketState]:
    """inode → state of every socket in this network namespace, from /proc/net."""
    states: dict[int, SocketState] = {}
    for table in INET_TABLES:
        for fields in _rows(table):
            if len(fields) > 9 and fields[9].isdigit():
                states[int(fields[9])] = SocketState(table, fields[3], int(fields[4].split(":")[1], 16))
    for table, column in COUNTED_TABLES.items():
        for fields in _rows(table):
            if len(fields) > column and fields[-1].isdigit():
                states[int(fields[-1])] = SocketState(table, "", int(fields[column]))
    unix = [fields for fields in _rows("unix") if len(fields) > 6]
    waiting: dict[str, int] = {}
    for fields in unix:
        if fields[6] == UNIX_NO_SOCKET and len(fields) > 7:
            waiting[fields[7]] = waiting.get(fields[7], 0) + 1
    for fields in unix:
        if fields[6] == UNIX_NO_SOCKET:
            continue
        name = fields[7] if len(fields) > 7 else ""
        listening = int(fields[3], 16) & UNIX_LISTENING
        states[int(fields[6])] = SocketState(
            "unix",
            "listen" if listening else fields[5],
            waiting.get(name, 0) if listening else 0,
            name,
            fields[4] == UNIX_DATAGRAM,
        )
    states.pop(0, None)
    return states


def written_sockets(before: dict[int, SocketState], after: dict[int, SocketState]) -> tuple[set[int], set[int]]:
    """(sockets that something reached between the two looks, named Unix datagram sockets that cannot be told),
    among `after`'s. Only the runner can have sent anything while every process of the agent was frozen."""
    written, unknowable = set(), set()
    for inode, now in after.items():
        then = before.get(inode)
        if now.table in ("tcp", "tcp6") and now.state != TCP_LISTEN:
            # An established connection receives only from its peer; one that was not has a new peer if it has any.
            if then is None or then.state != TCP_ESTABLISHED:
                if now.queued or then is None or now.state != then.state:
                    written.add(inode)
        elif now.table == "unix" and now.datagram and now.name:
            unknowable.add(inode)
        elif now.queued > (then.queued if then else 0):
            written.add(inode)
    return written, unknowable


def held_sockets(pid: int) -> set[int] | None:
    """Socket inodes among `pid`'s open files; None when they cannot be read (the process made itself
    non-dumpable). Root in a container lacks CAP_SYS_PTRACE, which reading another user's /proc/<pid>/fd needs, so
    they are read with the process's own uids and gids as the effective ones (the kernel compares the caller's fsuid
    and fsgid with all of the target's)."""
    try:
        ids = {
            line.split(":")[0]: line.split()[1:4]
            for line in Path(f"/proc/{pid}/status").read_text().splitlines()
            if line.startswith(("Uid:", "Gid:"))
        }
    except OSError:
        return set()  # gone
    if len(set(ids.get("Uid", []))) != 1 or len(set(ids.get("Gid", []))) != 1:
        return None  # real, effective and saved ids differ (a set-id program): its files are closed to one user
    os.setegid(int(ids["Gid"][0]))
    os.seteuid(int(ids["Uid"][0]))
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except PermissionError:
        return None
    except OSError:  # the process is gone
        return set()
    finally:
        os.seteuid(0)
        os.setegid(0)
    return {int(link[8:-1]) for link in links if link.startswith("socket:[")}


def cut_socket_channels(agent_uids: Sequence[int], before: dict[int, SocketState]) -> dict:
    """Kill the agent processes data from the runner could have reached (module docstring); returns a report."""
    after = socket_states()
    written, unknowable = written_sockets(before, after)
    report: dict = {"agent_sockets_written_by_runner": [], "agent_processes_killed": []}
    if not written | unknowable:
        return report
    agents = set(processes_of(agent_uids))
    holders = {int(entry): held_sockets(int(entry)) for entry in os.listdir("/proc") if entry.isdigit()}
    held_by_agents = set().union(*(held for pid, held in holders.items() if pid in agents and held))
    held_by_others = set().union(*(held for pid, held in holders.items() if pid not in agents and held))
    # Held by no process: a descriptor in flight, sent over a Unix socket that an agent process holds.
    in_flight = (written | unknowable) - held_by_agents - held_by_others
    reached = ((written | unknowable) & held_by_agents) | in_flight
    if not reached:
        return report
    unix = {inode for inode, state in after.items() if state.table == "unix"}
    doomed = sorted(
        pid for pid in agents if (held := holders.get(pid)) is None or held & reached or (in_flight and held & unix)
    )
    for uid in agent_uids:
        own = processes_of([uid])
        signal_processes(uid, [pid for pid in doomed if pid in own], signal.SIGKILL)
    report.update(
        agent_sockets_written_by_runner=sorted(written & reached),
        agent_datagram_sockets_not_checkable=sorted(unknowable & reached),
        agent_processes_killed=doomed,
    )
    return report


def remove_ipc_objects(agent_uid: int, runner_uid: int) -> int:
    """Remove SysV message queues, shared memory and semaphores the runner made, or the agent's that others write."""
    return remove_sysv_objects(
        lambda item: runner_uid in (item.owner, item.creator) or (item.owner == agent_uid and bool(item.perms & 0o002))
    )


def reached_the_agent(report: dict) -> bool:
    """Whether a sweep's report shows the runner wrote into a file or a socket of the agent's: the run is invalid."""
    return bool(report.get("agent_files_written_by_runner") or report.get("agent_sockets_written_by_runner"))


class Quarantine:
    """Context manager: the agent's users frozen, the runner user's traces removed by `sweep()` (module docstring)."""

    def __init__(self, agent_users: Sequence[str], runner_user: str | None) -> None:
        self.agent_uids = uids_of(agent_users)
        self.runner_uid = dedicated_runner(agent_users, runner_user)
        self.active = self.runner_uid is not None
        self.frozen_since = time.time()
        self._frozen: dict[int, list[int]] = {}
        self._sockets: dict[int, SocketState] = {}

    def __enter__(self) -> "Quarantine":
        if self.active:
            self._frozen = freeze(self.agent_uids)
            self._sockets = socket_states()
            time.sleep(TIMESTAMP_MARGIN_S)
        self.frozen_since = time.time() + TIMESTAMP_MARGIN_S
        return self

    def sweep(self) -> dict:
        """After the module and its programs are done: remove every channel to the agent (module docstring)."""
        if not self.active:
            return {"quarantine": "inactive (no dedicated runner user)"}
        assert self.runner_uid is not None
        return {
            "agent_processes_frozen": sum(len(pids) for pids in self._frozen.values()),
            "runner_processes_left": kill_everything([self.runner_uid], RUNNER_KILL_DEADLINE_S),
            "runner_files_removed": remove_files_of(self.runner_uid)[:50],
            "agent_files_written_by_runner": [
                path for uid in self.agent_uids for path in remove_written_by_others(uid, self.frozen_since)
            ][:50],
            **cut_socket_channels(self.agent_uids, self._sockets),
            "ipc_objects_removed": sum(remove_ipc_objects(uid, self.runner_uid) for uid in self.agent_uids),
        }

    def __exit__(self, *exc: object) -> None:
        if self.active:
            resume(self._frozen)


def sweep_flags(report: dict) -> dict[str, bool]:
    """A sweep's report for a result's details: whether each kind of trace was found, never how many or which (the
    runner's code saw held-out data, so its counts and file names could carry it)."""
    if "quarantine" in report:
        return {"quarantine_active": False}
    return {"quarantine_active": True, **{kind: bool(found) for kind, found in report.items()}}
