"""What a user's processes leave in memory after they die, found and removed (Linux; issue 46, README security model).

Killing every process of a user does not free the kernel objects they made: a System V shared-memory segment, a
semaphore set or message queue, a POSIX message queue, a file in a tmpfs folder (/dev/shm, /tmp, /var/tmp in the
sandbox) keep their pages charged to the container's memory limit with no process left to blame. The next root
command (the final stop's staging, a scoring program) then meets the out-of-memory killer. `reclaim(uids)` removes
every such object the users own or created; the sandbox's caps bound what they can hold meanwhile
(`rebench_inspect.runtime.sandbox`: compose `sysctls`, the tmpfs sizes).

The OOM killer's choice is steered too: `offer_to_oom_killer()` puts the agent's code at scoring time first in line, so
that when memory runs out it dies, not root's scoring program. Without CAP_SYS_RESOURCE (Docker's default set lacks
it, and some engines cannot grant it) that code may lower its score back to the container's (0, root's too): then
the killer picks by memory held, and the caps above keep what the code can hold outside its own processes small.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import NamedTuple

# Memory-backed folders of the sandbox (tmpfs) where the agent's users can write, and POSIX message queues' folder.
MEMORY_FOLDERS = ("/dev/shm", "/tmp", "/var/tmp", "/dev/mqueue")
IPC_RMID = 0
# /proc/self/oom_score_adj: 1000 is always the OOM killer's first choice (raising one's own needs no privilege).
UNTRUSTED_OOM_SCORE = 1000


class SysvObject(NamedTuple):
    kind: str  # "shm", "sem" or "msg": the file under /proc/sysvipc
    id: int
    owner: int  # uid
    creator: int  # cuid
    perms: int


_ID_COLUMN = {"shm": "shmid", "sem": "semid", "msg": "msqid"}


def sysv_objects() -> list[SysvObject]:
    """Every System V IPC object of this IPC namespace (the container's), from /proc/sysvipc."""
    found = []
    for kind, id_column in _ID_COLUMN.items():
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(header, line.split()))
            try:
                found.append(
                    SysvObject(kind, int(row[id_column]), int(row["uid"]), int(row["cuid"]), int(row["perms"], 8))
                )
            except (KeyError, ValueError):
                continue
    return found


def remove_sysv_object(item: SysvObject) -> bool:
    """IPC_RMID through libc (no `ipcrm` needed in the image); False when it is gone or not ours to remove."""
    libc = ctypes.CDLL(None, use_errno=True)
    if item.kind == "shm":
        result = libc.shmctl(item.id, IPC_RMID, None)
    elif item.kind == "sem":
        result = libc.semctl(item.id, 0, IPC_RMID)
    else:
        result = libc.msgctl(item.id, IPC_RMID, None)
    return result == 0


def remove_sysv_objects(condemned: Callable[[SysvObject], bool]) -> int:
    """Remove every System V object `condemned` picks; returns how many went."""
    return sum(remove_sysv_object(item) for item in sysv_objects() if condemned(item))


def remove_files_in_memory_of(uids: Iterable[int], folders: Iterable[str] = MEMORY_FOLDERS) -> int:
    """Remove every file and folder the `uids` own under `folders` (deepest first, links never followed, other
    filesystems below them left alone); returns how many went. `find` walks with descriptors (fts), so a tree
    nested past Python's recursion limit or past PATH_MAX is removed too."""
    owners = [argument for uid in uids for argument in ("-o", "-uid", str(uid))][1:]
    present = [folder for folder in folders if os.path.isdir(folder)]
    if not owners or not present:
        return 0
    # -mindepth 1: the folders themselves stay; -delete prints a dot only for what it removed.
    command = ["find", *present, "-xdev", "-mindepth", "1", "-depth", "(", *owners, ")", "-delete", "-printf", "."]
    listing = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, check=False)
    return len(listing.stdout)


def reclaim(uids: Iterable[int]) -> dict[str, int]:
    """After every process of `uids` is dead: remove the System V objects they own or created, and their files in the
    memory-backed folders. Counts only (the names are the agent's)."""
    wanted = set(uids)
    return {
        "sysv_objects_removed": remove_sysv_objects(lambda item: bool({item.owner, item.creator} & wanted)),
        "memory_files_removed": remove_files_in_memory_of(wanted),
    }


def offer_to_oom_killer() -> None:
    """This process and its children are the OOM killer's first choice (the agent's code at scoring time)."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write(str(UNTRUSTED_OOM_SCORE))
    except OSError:  # no /proc (never in the sandbox): the limit is the container's alone
        pass
