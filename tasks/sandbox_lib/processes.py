"""Make sure nothing the agent's code started outlives a scoring step (Linux).

A scoring program calls `become_subreaper()` once at start: processes that its children orphan (double fork,
`setsid`, daemons) are then re-parented to it instead of to init, so `kill_descendants()` can find and kill them.
"""

import ctypes
import os
import signal
import time
from collections.abc import Callable

from .users import reap_children

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> bool:
    """Adopt orphaned descendants (prctl PR_SET_CHILD_SUBREAPER); False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read().decode(errors="replace")
            # the command name may contain spaces and parentheses: fields after the last ')'
            fields = stat[stat.rindex(")") + 2 :].split()
            parents[int(entry)] = int(fields[1])
        except (OSError, ValueError, IndexError):
            continue
    return parents


def descendants(root: int | None = None) -> list[int]:
    """Pids of every live descendant of `root` (default: this process)."""
    root = os.getpid() if root is None else root
    parents = _parents()
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], list(children.get(root, []))
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


def kill_all(find: Callable[[], list[int]], rounds: int = 5) -> int:
    """SIGKILL the pids `find()` returns, again until it returns none (at most `rounds` times), reaping this
    process's exited children; returns how many signals were sent."""
    killed = 0
    for _ in range(rounds):
        pids = find()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.05)
        reap_children()
    return killed


def kill_descendants(rounds: int = 5) -> int:
    """SIGKILL every descendant of this process and reap them; returns how many were killed."""
    return kill_all(descendants, rounds)


def wait_for_descendants(deadline: float, poll_s: float = 0.05) -> bool:
    """Wait until no descendant of this process is left (reaping them as they exit); False at `deadline`
    (`time.monotonic()`) with some still running."""
    while True:
        reap_children()
        if not descendants():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll_s)
