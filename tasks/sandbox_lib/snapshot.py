"""Copy the agent's workspace into a scoring snapshot that nothing the agent does can change or redirect.

The copy runs as root over a directory the agent controls, so it trusts no path: every directory is opened relative
to its parent's descriptor without following links (a directory swapped for a link mid-copy fails instead of being
followed), files are opened non-blocking and copied only when `fstat` says they are regular (a named pipe, socket or
device is skipped, never read), symbolic links are kept only when they are relative and stay inside the tree, and
the copy stops with `SnapshotTooLarge` past a size or time limit. What was left out is reported, never silently lost.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .result import Reason, ReasonError

# Defaults generous for a workspace of code; environments whose workspaces hold models copy those files themselves.
DEFAULT_MAX_BYTES = 4 * 1024**3
DEFAULT_MAX_SECONDS = 120.0
_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


SNAPSHOT_TOO_SLOW = Reason("copying the workspace took too long")
SNAPSHOT_TOO_LARGE = Reason("the workspace holds more than {max_bytes} bytes to score")


class SnapshotTooLarge(ReasonError):
    """The workspace exceeds the snapshot's size or time limit (an invalid submission, not a scorer failure)."""


@dataclass
class SnapshotReport:
    path: Path
    files: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)  # "relative/path (why)"


def _ignored(relative: str, name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p) for p in patterns)


def link_stays_inside(relative: str, target: str) -> bool:
    if target.startswith("/"):
        return False
    parts: list[str] = []
    for part in (PurePosixPath(relative).parent / target).parts:
        if part == "..":
            if not parts:
                return False
            parts.pop()
        elif part != ".":
            parts.append(part)
    return True


class _Copier:
    def __init__(self, owner: tuple[int, int] | None, ignore: Sequence[str], max_bytes: int, deadline: float) -> None:
        self.owner, self.ignore, self.max_bytes, self.deadline = owner, ignore, max_bytes, deadline

    def _own(self, fd: int) -> None:
        if self.owner is not None:
            os.fchown(fd, *self.owner)

    def copy_dir(self, source_fd: int, destination: Path, relative: str, report: SnapshotReport) -> None:
        with os.scandir(source_fd) as entries:
            names = sorted(entry.name for entry in entries)
        for name in names:
            path = f"{relative}{name}"
            if _ignored(path, name, self.ignore):
                continue
            if time.monotonic() > self.deadline:
                raise SnapshotTooLarge(SNAPSHOT_TOO_SLOW)
            info = os.stat(name, dir_fd=source_fd, follow_symlinks=False)
            if stat.S_ISDIR(info.st_mode):
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=source_fd)
                except OSError as ex:
                    report.skipped.append(f"{path}/ (unreadable: {ex.strerror})")
                    continue
                try:
                    (destination / name).mkdir(mode=0o755)
                    dir_fd = os.open(destination / name, _DIR_FLAGS)
                    try:
                        self._own(dir_fd)
                    finally:
                        os.close(dir_fd)
                    self.copy_dir(child, destination / name, f"{path}/", report)
                finally:
                    os.close(child)
            elif stat.S_ISREG(info.st_mode):
                self.copy_file(source_fd, name, destination / name, path, report)
            elif stat.S_ISLNK(info.st_mode):
                target = os.readlink(name, dir_fd=source_fd)
                if link_stays_inside(path, target):
                    os.symlink(target, destination / name)
                    if self.owner is not None:
                        os.lchown(destination / name, *self.owner)
                else:
                    report.skipped.append(f"{path} (a link that leaves the workspace)")
            else:
                report.skipped.append(f"{path} (not a regular file or directory)")

    def copy_file(self, source_fd: int, name: str, destination: Path, path: str, report: SnapshotReport) -> None:
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=source_fd)
        except OSError as ex:  # replaced by a link or removed since it was listed, or unreadable
            report.skipped.append(f"{path} (unreadable: {ex.strerror})")
            return
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                report.skipped.append(f"{path} (not a regular file)")
                return
            out = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IMODE(info.st_mode) & 0o755)
            try:
                self._own(out)
                while chunk := os.read(fd, _CHUNK):
                    report.bytes += len(chunk)
                    if report.bytes > self.max_bytes:
                        raise SnapshotTooLarge(SNAPSHOT_TOO_LARGE.format(max_bytes=self.max_bytes))
                    if time.monotonic() > self.deadline:
                        raise SnapshotTooLarge(SNAPSHOT_TOO_SLOW)
                    os.write(out, chunk)
            finally:
                os.close(out)
            report.files += 1
        finally:
            os.close(fd)


def snapshot_tree(
    workspace: Path,
    destination: Path,
    *,
    user: str | None = None,
    ignore: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
) -> SnapshotReport:
    """Copy `workspace` into the existing empty directory `destination` (owned by `user` when given)."""
    owner = None
    if user:
        account = pwd.getpwnam(user)
        owner = (account.pw_uid, account.pw_gid)
        os.chown(destination, *owner)
    report = SnapshotReport(destination)
    try:
        root = os.open(workspace, _DIR_FLAGS)
    except FileNotFoundError:
        return report  # an empty snapshot: the scoring program says what is missing
    try:
        _Copier(owner, tuple(ignore), max_bytes, time.monotonic() + max_seconds).copy_dir(root, destination, "", report)
    finally:
        os.close(root)
    return report


def snapshot_workspace(workspace: Path, user: str | None, ignore: Sequence[str] = ()) -> Path:
    """A fresh snapshot directory (the caller removes it); see `snapshot_tree` for what is copied."""
    destination = Path(tempfile.mkdtemp(prefix="rebench-snapshot-"))
    snapshot_tree(workspace, destination, user=user, ignore=ignore)
    return destination
