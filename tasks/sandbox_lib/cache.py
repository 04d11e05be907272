"""Content-keyed cache entries built once (standard library only: staged programs and the host import it).

An entry is a folder `<parent>/<name>` whose name carries the key of what it was built from (a hash of code,
settings and data). `cached_entry` gives it, building it first when it is missing:

- one build per entry across threads, processes and samples: the builder holds an exclusive `flock` on
  `<parent>/.<name>.lock`; whoever waited on the lock finds the entry complete and uses it;
- atomic: the build goes into a temporary folder `<parent>/.<name>.build-*`, marked complete, then renamed into
  place, so a reader sees a whole entry or none;
- no leftovers: a failed build removes its folder; folders of builds that were killed (`<parent>/.<name>.*`) are
  removed by the next builder of the same entry, which holds the lock, so none of them can be in use.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from .paths import cache_root

COMPLETE = "complete"  # the marker file of a finished entry: the build's seconds


def is_complete(entry: Path) -> bool:
    return (entry / COMPLETE).is_file()


@contextmanager
def entry_lock(entry: Path, *, blocking: bool = True) -> Iterator[None]:
    """Hold the entry's lock: one builder at a time; the kernel drops it if the holder dies. Not `blocking`: raise
    BlockingIOError when another holds it."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(entry.parent / f".{entry.name}.lock", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if blocking else fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield
    finally:
        os.close(descriptor)


def one_timed_run_at_a_time(environment: str) -> AbstractContextManager[None]:
    """Timed scoring runs of `environment` take turns: two at once slow each other, so a score would depend on what
    else the machine was scoring (two samples of a local run, or one sample's score beside another's anchor
    measurement). One at a time per cache folder: per machine in a local run, per container in Docker."""
    return entry_lock(cache_root() / environment / "timed-run")


def remove_leftovers(entry: Path) -> None:
    """Remove the temporary folders of killed builds of `entry`; call it holding the entry's lock."""
    for path in entry.parent.glob(f".{entry.name}.*"):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)


def cached_entry(entry: Path, build: Callable[[Path], None], *, rebuild: bool = False) -> tuple[Path, bool]:
    """The complete entry, built by `build(folder)` into a fresh folder when missing (or when `rebuild`);
    returns (entry, whether this call built it)."""
    if not rebuild and is_complete(entry):
        return entry, False
    with entry_lock(entry):
        if not rebuild and is_complete(entry):  # built by whoever held the lock before us
            return entry, False
        remove_leftovers(entry)
        staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}.build-", dir=entry.parent))
        try:
            started = time.monotonic()
            build(staging)
            (staging / COMPLETE).write_text(f"{time.monotonic() - started:.1f}\n")
            if entry.exists():  # incomplete (a build from before this lock existed) or rebuilt on request
                old = entry.parent / f".{entry.name}.old"
                os.replace(entry, old)
                shutil.rmtree(old, ignore_errors=True)
            os.replace(staging, entry)
        finally:
            shutil.rmtree(staging, ignore_errors=True)  # only still there when the build failed
    return entry, True
