"""Keep everything the agent's code writes during scoring away from the agent (Linux; threat models:
tasks/rust_codecontests/THREAT_MODEL.md, docs/fidelity.md for optimize_llm_foundry).

While scoring runs, the agent's code (rust_codecontests' module and the programs it judges, optimize_llm_foundry's
finetune.sh) runs as a dedicated runner user, never the agent's user, in private folders. What it could still do
is write somewhere the agent reads: a world-writable file or FIFO the agent prepared, a socket an agent process
listens on, a SysV IPC object, or a file of its own made readable on purpose. `Quarantine` closes those channels:

- on entry, every process of the agent's user is stopped (SIGSTOP), and processes of that user that appear later
  are stopped as they appear, so nothing of the agent's runs concurrently with its code;
- on `sweep()`, after the module and every program are dead: every process of the runner user is killed, every file
  the runner user owns is removed (whole filesystem, /proc and /sys aside), agent-owned files that others may write
  and that changed while the agent was stopped are removed (and reported: the run is then invalid), agent processes
  holding a socket that can receive data (listening TCP, UDP, Unix), or whose open files cannot be read, are
  killed, and SysV IPC objects of either user that others may write are removed;
- on exit, the agent's surviving processes are continued (SIGCONT).

Without a dedicated runner user (the local sandbox, host tests) none of this applies: there is no second user to
keep apart, and the agent's processes are this process's own.
"""

import os
import pwd
import signal
import stat
import subprocess
import threading
import time
from pathlib import Path

from .processes import kill_all

# Trees never searched for leftovers: kernel views, not files anyone wrote. /dev is searched only at /dev/shm.
SKIPPED_TREES = ("/proc", "/sys", "/dev")
SEARCHED_UNDER_DEV = ("/dev/shm", "/dev/mqueue")
FREEZE_POLL_S = 0.1
# Timestamps are coarse (a jiffy); files changed later than this after the freeze are the runner's doing.
TIMESTAMP_MARGIN_S = 0.05


# The dedicated user scoring programs run the agent's code as in containers (created by the Dockerfiles of the
# environments that use it): then
# no process the agent left running can read what that code is given, trace it, or rewrite its results.
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


def uid_of(user: str | None) -> int | None:
    if not user:
        return None
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        return None


def _process_uid(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("Uid:"):
                    return int(line.split()[1])  # real uid
    except (OSError, ValueError, IndexError):
        return None
    return None


def processes_of(uid: int) -> list[int]:
    """Live pids whose real uid is `uid` (never this process)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid() and _process_uid(int(entry)) == uid:
            pids.append(int(entry))
    return pids


def kill_processes_of(uid: int, rounds: int = 5) -> int:
    return kill_all(lambda: processes_of(uid), rounds)


def _walk(roots: tuple[str, ...] = ("/",)):
    """(path, lstat) of every file and directory under `roots`, bottom-up, links never followed."""
    for root in roots:
        for top, dirs, files in os.walk(root, topdown=False, onerror=lambda _: None, followlinks=False):
            if (
                top != "/"
                and any(top == s or top.startswith(s + "/") for s in SKIPPED_TREES)
                and not any(top == d or top.startswith(d + "/") for d in SEARCHED_UNDER_DEV)
            ):
                continue
            for name in [*files, *dirs]:
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


def _receiving_socket_inodes() -> set[int]:
    """Inodes of sockets that can receive data from strangers: listening TCP, any UDP, any Unix socket."""
    inodes: set[int] = set()
    for table, listening_only in (
        ("tcp", True),
        ("tcp6", True),
        ("udp", False),
        ("udp6", False),
    ):
        try:
            lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and (not listening_only or fields[3] == "0A"):  # 0A = TCP_LISTEN
                inodes.add(int(fields[9]))
    try:
        for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) > 6:
                inodes.add(int(fields[6]))
    except OSError:
        pass
    inodes.discard(0)
    return inodes


def _held_sockets(pid: int, uid: int) -> set[int] | None:
    """Socket inodes among `pid`'s open files; None when they cannot be read (the process made itself
    non-dumpable). Root in a container lacks CAP_SYS_PTRACE, which reading another user's /proc/<pid>/fd needs, so
    the links are read with the process's own uid as the effective one (the kernel checks the caller's fsuid)."""
    os.seteuid(uid)
    try:
        links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
    except PermissionError:
        return None
    except OSError:  # the process is gone
        return set()
    finally:
        os.seteuid(0)
    return {int(link[8:-1]) for link in links if link.startswith("socket:[")}


def kill_socket_holders(uid: int) -> list[int]:
    """Kill processes of `uid` that hold a socket the runner could have sent data to, or hide what they hold."""
    receiving = _receiving_socket_inodes()
    killed = []
    for pid in processes_of(uid):
        held = _held_sockets(pid, uid)
        if held is None or held & receiving:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return killed


def remove_ipc_objects(agent_uid: int, runner_uid: int) -> int:
    """Remove SysV message queues, shared memory and semaphores the runner made, or the agent's that others write."""
    removed = 0
    for table, flag, key in (
        ("msg", "-q", "msqid"),
        ("shm", "-m", "shmid"),
        ("sem", "-s", "semid"),
    ):
        try:
            lines = Path(f"/proc/sysvipc/{table}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(header, line.split()))
            try:
                runners = runner_uid in (int(row["uid"]), int(row["cuid"]))
                agents_open = int(row["uid"]) == agent_uid and int(row["perms"], 8) & 0o002
            except (KeyError, ValueError):
                continue
            if (runners or agents_open) and key in row:
                try:
                    removed += (
                        subprocess.run(["ipcrm", flag, row[key]], check=False, capture_output=True).returncode == 0
                    )
                except OSError:  # no ipcrm in this image: nothing to remove with
                    return removed
    return removed


class Quarantine:
    """Context manager: the agent's user stopped, the runner user's traces removed by `sweep()` (module docstring)."""

    def __init__(self, agent_user: str | None, runner_user: str | None) -> None:
        self.agent_uid = uid_of(agent_user)
        self.runner_uid = uid_of(runner_user)
        # Only a dedicated runner (another user than the agent's, not root) can be kept apart.
        self.active = (
            self.agent_uid is not None and self.runner_uid is not None and self.runner_uid not in (0, self.agent_uid)
        )
        self.frozen_since = time.time()
        self._stopped: set[int] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _freeze_once(self) -> None:
        assert self.agent_uid is not None
        for pid in processes_of(self.agent_uid):
            if pid not in self._stopped:
                try:
                    os.kill(pid, signal.SIGSTOP)
                    self._stopped.add(pid)
                except (ProcessLookupError, PermissionError):
                    pass

    def _keep_frozen(self) -> None:
        while not self._stop.wait(FREEZE_POLL_S):
            self._freeze_once()

    def __enter__(self) -> "Quarantine":
        if self.active:
            self._freeze_once()
            self._thread = threading.Thread(target=self._keep_frozen, daemon=True)
            self._thread.start()
            time.sleep(TIMESTAMP_MARGIN_S)
        self.frozen_since = time.time() + TIMESTAMP_MARGIN_S
        return self

    def sweep(self) -> dict:
        """After the module and its programs are done: remove every channel to the agent (module docstring)."""
        if not self.active:
            return {"quarantine": "inactive (no dedicated runner user)"}
        assert self.agent_uid is not None and self.runner_uid is not None
        report = {
            "runner_processes_killed": kill_processes_of(self.runner_uid),
            "runner_files_removed": remove_files_of(self.runner_uid)[:50],
            "agent_files_written_by_runner": remove_written_by_others(self.agent_uid, self.frozen_since)[:50],
            "agent_socket_holders_killed": kill_socket_holders(self.agent_uid),
            "ipc_objects_removed": remove_ipc_objects(self.agent_uid, self.runner_uid),
        }
        return report

    def __exit__(self, *exc: object) -> None:
        if not self.active:
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for pid in self._stopped:
            try:
                os.kill(pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass


def sweep_flags(report: dict) -> dict[str, bool]:
    """A sweep's report for a result's details: whether each kind of trace was found, never how many or which (the
    runner's code saw held-out data, so its counts and file names could carry it)."""
    if "quarantine" in report:
        return {"quarantine_active": False}
    return {"quarantine_active": True, **{kind: bool(found) for kind, found in report.items()}}
