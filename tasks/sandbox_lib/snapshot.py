"""Copy the agent's workspace into a scoring snapshot that nothing the agent does can change or redirect.

The copy runs as root over a directory the agent controls, so it trusts no path and builds none. One iterative walk
(`walk`) opens every folder relative to its parent's descriptor without following links (a folder swapped for a link
mid-copy fails instead of being followed) and hands each entry to a sink that writes relative to its own descriptors:
a directory (`snapshot_tree`) or a tar archive (`submission.pack`). Files are opened non-blocking and copied only
when `fstat` says they are regular (a named pipe, socket or device is skipped, never read); symbolic links are kept
only when they stay inside the tree, alone or chained (`link_stays_inside`). Past any of its bounds (`Limits`: bytes,
time, entries, folder depth, path length) the walk stops with `SnapshotTooLarge`, whose reason names the bound. What
was left out is reported, never silently lost.
"""

from __future__ import annotations

import fnmatch
import os
import pwd
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar

from .result import Reason, ReasonError

# Defaults generous for a workspace of code; environments whose workspaces hold models copy those files themselves.
DEFAULT_MAX_BYTES = 4 * 1024**3
DEFAULT_MAX_SECONDS = 120.0
# Each entry costs a tar header and a file made on unpacking: 150,000 empty files passed the byte limit, then took too
# long to archive, carry and unpack.
DEFAULT_MAX_ENTRIES = 100_000
# Each folder on the walk's path holds one descriptor on each side: 2 x 64 stays far below any `ulimit -n`.
DEFAULT_MAX_DEPTH = 64
# Well under PATH_MAX (4,096 bytes) with the copy's own folder in front, for whatever later opens a file by its path.
DEFAULT_MAX_PATH_BYTES = 1024
_CHUNK = 1 << 20
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


SNAPSHOT_TOO_SLOW = Reason("copying the workspace took longer than {max_seconds:g} s")
SNAPSHOT_TOO_LARGE = Reason("the workspace holds more than {max_bytes} bytes to score")
SNAPSHOT_TOO_MANY_ENTRIES = Reason("the workspace holds more than {max_entries} files, folders and links to score")
SNAPSHOT_TOO_DEEP = Reason("the workspace nests folders more than {max_depth} deep")
SNAPSHOT_PATH_TOO_LONG = Reason("the workspace holds a path longer than {max_path_bytes} bytes")


class SnapshotTooLarge(ReasonError):
    """The workspace exceeds one of the snapshot's bounds (an invalid submission, not a scorer failure)."""


@dataclass(frozen=True)
class Limits:
    """The bounds of one copy; the walk stops with `SnapshotTooLarge` past any of them."""

    max_bytes: int = DEFAULT_MAX_BYTES  # the regular files' sizes, summed
    max_seconds: float = DEFAULT_MAX_SECONDS
    max_entries: int = DEFAULT_MAX_ENTRIES  # files, folders, links and skipped entries, not counting ignored ones
    max_depth: int = DEFAULT_MAX_DEPTH  # folders nested in the workspace
    max_path_bytes: int = DEFAULT_MAX_PATH_BYTES  # an entry's path in the workspace, UTF-8 (or as the kernel has it)


@dataclass
class SnapshotReport:
    files: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)  # "relative/path (why)"


class FileContent:
    """A regular file being copied: exactly `size` bytes (its size when opened), read in chunks under the deadline.
    A file that shrinks meanwhile reads as zeros to its old size and one that grows is cut there, so a sink that
    wrote the size first (a tar header) never sees another."""

    def __init__(self, fd: int, info: os.stat_result, walk: _Walk) -> None:
        self.size, self.mode = info.st_size, stat.S_IMODE(info.st_mode) & 0o755
        self._fd, self._walk, self._left = fd, walk, info.st_size

    def read(self, size: int = _CHUNK) -> bytes:
        wanted = min(size if size >= 0 else self._left, self._left)
        data = b""
        while len(data) < wanted:
            self._walk.check_time()
            chunk = os.read(self._fd, min(wanted - len(data), _CHUNK))
            data += chunk or bytes(wanted - len(data))
        self._left -= wanted
        return data


Folder = TypeVar("Folder")


class Sink(Protocol[Folder]):
    """Where the walk writes: `Folder` is the sink's handle on a folder it made (a descriptor, or nothing)."""

    def folder(self, parent: Folder, name: str, path: str) -> Folder: ...

    def done(self, folder: Folder) -> None: ...

    def file(self, parent: Folder, name: str, path: str, content: FileContent) -> None: ...

    def link(self, parent: Folder, name: str, path: str, target: str) -> None: ...


def _ignored(relative: str, name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) or fnmatch.fnmatch(relative, p) for p in patterns)


def link_stays_inside(relative: str, target: str) -> bool:
    """Whether the link at path `relative` in the tree, pointing at `target`, resolves inside the tree, followed alone
    or through any chain of links that pass this test: the target is relative, its `..`s all come first, and there
    are no more of them than folders above the link.

    Why that holds for chains: the kernel applies a link's leading `..`s to the real folder that holds the link,
    however the resolution got there, so they climb at most to the tree's top; every later component descends, into
    a real folder or through another such link, which again climbs no higher than its own folder. A `..` after a name
    would climb from wherever that name led, which the text cannot tell: `a/b/c/l/../../..` is `a` on paper, but
    when `l` is a link to `../../..` it ends three folders above the tree."""
    if not target or target.startswith("/"):
        return False
    climbs, named = 0, False
    for part in target.split("/"):
        if part == "..":
            if named:
                return False
            climbs += 1
        elif part not in ("", "."):
            named = True
    return climbs <= relative.count("/")


@dataclass
class _Frame(Generic[Folder]):
    """A folder on the walk's path: its descriptor in the workspace, the sink's handle, its names still to copy."""

    source: int
    folder: Folder
    prefix: str  # "" for the top, else "a/b/"
    names: list[str]  # sorted, last first


class _Walk:
    """One copy under way: its bounds and deadline, the entries counted so far, and its report."""

    def __init__(self, limits: Limits, ignore: Sequence[str]) -> None:
        self.limits, self.ignore = limits, tuple(ignore)
        self.deadline = time.monotonic() + limits.max_seconds
        self.entries = 0
        self.report = SnapshotReport()

    def check_time(self) -> None:
        if time.monotonic() > self.deadline:
            raise SnapshotTooLarge(SNAPSHOT_TOO_SLOW.format(max_seconds=self.limits.max_seconds))

    def listing(self, fd: int, prefix: str) -> list[str]:
        """The folder's names, counted and measured as they come: a folder of millions stops at the bound."""
        names = []
        with os.scandir(fd) as entries:
            for entry in entries:
                self.check_time()
                path = prefix + entry.name
                if _ignored(path, entry.name, self.ignore):
                    continue
                self.entries += 1
                if self.entries > self.limits.max_entries:
                    raise SnapshotTooLarge(SNAPSHOT_TOO_MANY_ENTRIES.format(max_entries=self.limits.max_entries))
                if len(os.fsencode(path)) > self.limits.max_path_bytes:
                    raise SnapshotTooLarge(SNAPSHOT_PATH_TOO_LONG.format(max_path_bytes=self.limits.max_path_bytes))
                names.append(entry.name)
        names.sort(reverse=True)
        return names

    def run(self, top: int, sink: Sink[Folder], root: Folder) -> None:
        """Copy the folder open as `top` into the sink's `root`, one entry at a time, with no recursion."""
        stack = [_Frame(top, root, "", self.listing(top, ""))]
        try:
            while stack:
                frame = stack[-1]
                if not frame.names:
                    self.close(stack.pop(), sink)
                    continue
                child = self.entry(frame, frame.names.pop(), sink, len(stack))
                if child is not None:
                    stack.append(child)
        finally:
            for frame in stack:
                self.close(frame, sink)

    @staticmethod
    def close(frame: _Frame[Folder], sink: Sink[Folder]) -> None:
        if frame.prefix:  # the top's descriptor and folder are the caller's
            sink.done(frame.folder)
            os.close(frame.source)

    def entry(self, frame: _Frame[Folder], name: str, sink: Sink[Folder], depth: int) -> _Frame[Folder] | None:
        """Copy one entry of `frame`'s folder; a folder to descend into comes back as a frame."""
        self.check_time()
        path, parent, skipped = frame.prefix + name, frame.folder, self.report.skipped
        try:
            info = os.stat(name, dir_fd=frame.source, follow_symlinks=False)
        except OSError as ex:  # removed since it was listed
            skipped.append(f"{path} (unreadable: {ex.strerror})")
            return None
        if stat.S_ISDIR(info.st_mode):
            if depth > self.limits.max_depth:
                raise SnapshotTooLarge(SNAPSHOT_TOO_DEEP.format(max_depth=self.limits.max_depth))
            try:
                source = os.open(name, _DIR_FLAGS, dir_fd=frame.source)
            except OSError as ex:  # replaced by a link or removed since it was listed, or unreadable
                skipped.append(f"{path}/ (unreadable: {ex.strerror})")
                return None
            try:
                names = self.listing(source, f"{path}/")
                return _Frame(source, sink.folder(parent, name, path), f"{path}/", names)
            except BaseException:
                os.close(source)
                raise
        if stat.S_ISREG(info.st_mode):
            self.file(frame, name, path, sink)
        elif stat.S_ISLNK(info.st_mode):
            try:
                target = os.readlink(name, dir_fd=frame.source)
            except OSError as ex:  # replaced since it was listed
                skipped.append(f"{path} (unreadable: {ex.strerror})")
                return None
            if link_stays_inside(path, target):
                sink.link(parent, name, path, target)
            else:
                skipped.append(f"{path} (a link that leaves the workspace)")
        else:
            skipped.append(f"{path} (not a regular file or directory)")
        return None

    def file(self, frame: _Frame[Folder], name: str, path: str, sink: Sink[Folder]) -> None:
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=frame.source)
        except OSError as ex:  # replaced by a link or removed since it was listed, or unreadable
            self.report.skipped.append(f"{path} (unreadable: {ex.strerror})")
            return
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                self.report.skipped.append(f"{path} (not a regular file)")
                return
            if self.report.bytes + info.st_size > self.limits.max_bytes:  # a sparse file counts at its full size
                raise SnapshotTooLarge(SNAPSHOT_TOO_LARGE.format(max_bytes=self.limits.max_bytes))
            sink.file(frame.folder, name, path, FileContent(fd, info, self))
            self.report.bytes += info.st_size
            self.report.files += 1
        finally:
            os.close(fd)


def walk(
    workspace: Path, sink: Sink[Folder], root: Folder, limits: Limits, ignore: Sequence[str] = ()
) -> SnapshotReport:
    """Copy `workspace` into `sink`, under its folder `root`: files and folders, links that stay inside, nothing
    matching an `ignore` glob (by name or by path in the workspace). A missing workspace copies as an empty one (the
    scoring program says what is missing), and so does one that is not a folder (a link put in its place)."""
    copy = _Walk(limits, ignore)
    try:
        top = os.open(workspace, _DIR_FLAGS)
    except FileNotFoundError:
        return copy.report
    except OSError as ex:
        copy.report.skipped.append(f"./ (not a folder: {ex.strerror})")
        return copy.report
    try:
        copy.run(top, sink, root)
    finally:
        os.close(top)
    return copy.report


class _DirectorySink:
    """Writes the walk into a directory: every call relative to a folder's descriptor, everything given to `owner`."""

    def __init__(self, owner: tuple[int, int] | None) -> None:
        self.owner = owner

    def folder(self, parent: int, name: str, path: str) -> int:
        os.mkdir(name, 0o755, dir_fd=parent)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        try:
            self._own(fd)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def done(self, folder: int) -> None:
        os.close(folder)

    def file(self, parent: int, name: str, path: str, content: FileContent) -> None:
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, content.mode, dir_fd=parent)
        with open(fd, "wb") as out:
            self._own(fd)
            shutil.copyfileobj(content, out, _CHUNK)

    def link(self, parent: int, name: str, path: str, target: str) -> None:
        os.symlink(target, name, dir_fd=parent)
        if self.owner is not None:
            os.chown(name, *self.owner, dir_fd=parent, follow_symlinks=False)

    def _own(self, fd: int) -> None:
        if self.owner is not None:
            os.fchown(fd, *self.owner)


def snapshot_tree(
    workspace: Path,
    destination: Path,
    *,
    user: str | None = None,
    ignore: Sequence[str] = (),
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_path_bytes: int = DEFAULT_MAX_PATH_BYTES,
) -> SnapshotReport:
    """Copy `workspace` into the existing empty directory `destination` (owned by `user` when given); see `walk`."""
    owner = None
    if user:
        account = pwd.getpwnam(user)
        owner = (account.pw_uid, account.pw_gid)
        os.chown(destination, *owner)
    limits = Limits(max_bytes, max_seconds, max_entries, max_depth, max_path_bytes)
    root = os.open(destination, _DIR_FLAGS)
    try:
        return walk(workspace, _DirectorySink(owner), root, limits, ignore)
    finally:
        os.close(root)


def snapshot_workspace(workspace: Path, user: str | None, ignore: Sequence[str] = ()) -> Path:
    """A fresh snapshot directory (the caller removes it); see `snapshot_tree` for what is copied."""
    destination = Path(tempfile.mkdtemp(prefix="rebench-snapshot-"))
    snapshot_tree(workspace, destination, user=user, ignore=ignore)
    return destination
