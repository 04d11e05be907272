"""Carry the agent's workspace from its container into the scoring service as a root-made copy (README, security
model: "Scoring apart from the agent").

    python3 -m rebench.sandbox_lib.submission pack --workspace W --out DIR [--ignore PATTERN]... [--max-bytes N]
        [--max-seconds S]
    python3 -m rebench.sandbox_lib.submission unpack --parts DIR --workspace W [--owner USER]

`pack` runs as root in the agent's container: the library's safe walk (`snapshot.walk`: nothing followed out of the
tree, no pipe or device read, bounds on bytes, time, entries, depth and path length) streams straight into an
uncompressed tar archive, cut into parts small enough for the host to read one at a time, in a root-only folder; it
prints one JSON line (the parts, or why the workspace could not be copied). The host moves the parts; `unpack` runs
as root in the scoring service, checks every member (regular files, folders and links that stay inside, each inside
a folder written before it, nothing else), replaces W with them and gives them to USER, so the scoring program finds
the workspace where and as it would in the agent's container. Neither side recurses; `unpack`'s paths are W's and
a member's, which `pack` keeps under its path bound.
"""

from __future__ import annotations

import argparse
import json
import os
import pwd
import shutil
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from .snapshot import (
    DEFAULT_MAX_BYTES,
    DEFAULT_MAX_DEPTH,
    DEFAULT_MAX_ENTRIES,
    DEFAULT_MAX_PATH_BYTES,
    DEFAULT_MAX_SECONDS,
    FileContent,
    Limits,
    SnapshotTooLarge,
    link_stays_inside,
    walk,
)

# Below Inspect's default read_file limit (100 MB): the host reads one part per call.
PART_BYTES = 64 * 1024**2
PART_PREFIX = "part-"


class _Parts:
    """A write-only stream that cuts what it is given into numbered files of at most `PART_BYTES`."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.names: list[str] = []
        self._file: BinaryIO | None = None
        self._left = 0

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            if self._file is None or self._left == 0:
                self._next()
            assert self._file is not None
            taken = view[: self._left]
            self._file.write(taken)
            self._left -= len(taken)
            view = view[len(taken) :]
        return len(data)

    def _next(self) -> None:
        self.close()
        name = f"{PART_PREFIX}{len(self.names):05d}"
        self.names.append(name)
        self._file = open(self.folder / name, "wb")  # noqa: SIM115 - closed by close() or the next part
        self._left = PART_BYTES

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self) -> None:
        self.close()
        for name in self.names:
            (self.folder / name).unlink()
        self.names.clear()


class _ArchiveSink:
    """Writes the walk as tar members, each from what the walk opened (no copy on disk). Members carry no owner
    (`unpack` gives them to its user) and the time of packing, not times the agent chose."""

    def __init__(self, archive: tarfile.TarFile) -> None:
        self.archive, self.mtime = archive, int(time.time())

    def folder(self, parent: None, name: str, path: str) -> None:
        self.archive.addfile(self._member(path, tarfile.DIRTYPE, 0o755))

    def done(self, folder: None) -> None:
        pass

    def file(self, parent: None, name: str, path: str, content: FileContent) -> None:
        member = self._member(path, tarfile.REGTYPE, content.mode)
        member.size = content.size
        self.archive.addfile(member, content)

    def link(self, parent: None, name: str, path: str, target: str) -> None:
        member = self._member(path, tarfile.SYMTYPE, 0o777)
        member.linkname = target
        self.archive.addfile(member)

    def _member(self, path: str, kind: bytes, mode: int) -> tarfile.TarInfo:
        member = tarfile.TarInfo(path)
        member.type, member.mode, member.mtime = kind, mode, self.mtime
        return member


class _Joined:
    """A read-only stream over the parts, in order."""

    def __init__(self, paths: list[Path]) -> None:
        self._paths = iter(paths)
        self._file: BinaryIO | None = None

    def read(self, size: int = -1) -> bytes:
        while True:
            if self._file is None:
                path = next(self._paths, None)
                if path is None:
                    return b""
                self._file = open(path, "rb")  # noqa: SIM115 - closed when exhausted
            data = self._file.read(size)
            if data:
                return data
            self._file.close()
            self._file = None


def pack(
    workspace: Path,
    out: Path,
    ignore: list[str],
    max_bytes: int = DEFAULT_MAX_BYTES,
    *,
    max_seconds: float = DEFAULT_MAX_SECONDS,
    max_entries: int = DEFAULT_MAX_ENTRIES,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_path_bytes: int = DEFAULT_MAX_PATH_BYTES,
) -> dict:
    """The workspace as parts of a tar archive in `out`, and what was left out; or, past a bound, why not (no part
    is left then)."""
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    limits = Limits(max_bytes, max_seconds, max_entries, max_depth, max_path_bytes)
    parts = _Parts(out)
    try:
        with tarfile.open(fileobj=parts, mode="w|", format=tarfile.PAX_FORMAT) as archive:  # type: ignore[call-overload]
            report = walk(workspace, _ArchiveSink(archive), None, limits, ignore)
    except SnapshotTooLarge as ex:
        parts.discard()
        return {"too_large": str(ex)}
    finally:
        parts.close()
    return {"parts": parts.names, "files": report.files, "bytes": report.bytes, "skipped": report.skipped[:50]}


def _checked(archive: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    """Members as `pack` writes them, refused otherwise: a path or link leaving the tree, a member written twice or
    not inside a folder written before it (a link's name used as a folder would lead wherever the link goes), or any
    other kind."""
    folders, written = {""}, set()
    for member in archive:
        name = member.name
        if any(part in ("", ".", "..") for part in name.split("/")):
            raise ValueError(f"submission member outside the workspace: {name!r}")
        if name in written or name.rpartition("/")[0] not in folders:
            raise ValueError(f"submission member written twice or outside a folder written before it: {name!r}")
        if member.issym() and not link_stays_inside(name, member.linkname):
            raise ValueError(f"submission link leaves the workspace: {name!r}")
        if not (member.isreg() or member.isdir() or member.issym()):
            raise ValueError(f"submission member of another kind: {name!r}")
        written.add(name)
        if member.isdir():
            folders.add(name)
        member.mode &= 0o755
        yield member


# The checks above are the filter: Python 3.14's default one ("data") would also drop the owner set below.
_NO_FILTER: dict[str, Any] = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}


def unpack(parts: Path, workspace: Path, owner: str | None) -> None:
    shutil.rmtree(workspace, ignore_errors=True)
    workspace.mkdir(mode=0o755, parents=True)
    ids = None
    if owner:
        account = pwd.getpwnam(owner)
        ids = (account.pw_uid, account.pw_gid)
        os.chown(workspace, *ids)
    paths = sorted(parts.glob(f"{PART_PREFIX}*"))
    with tarfile.open(fileobj=_Joined(paths), mode="r|") as archive:  # type: ignore[call-overload]
        for member in _checked(archive):
            if ids:  # tarfile gives each member its owner as it writes it: no walk over the tree afterwards
                member.uid, member.gid = ids
            archive.extract(member, workspace, set_attrs=True, numeric_owner=True, **_NO_FILTER)
    shutil.rmtree(parts, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rebench.sandbox_lib.submission")
    commands = parser.add_subparsers(dest="command", required=True)
    pack_parser = commands.add_parser("pack")
    pack_parser.add_argument("--workspace", type=Path, required=True)
    pack_parser.add_argument("--out", type=Path, required=True)
    pack_parser.add_argument("--ignore", action="append", default=[])
    pack_parser.add_argument("--max-bytes", type=int, default=DEFAULT_MAX_BYTES)
    pack_parser.add_argument("--max-seconds", type=float, default=DEFAULT_MAX_SECONDS)
    unpack_parser = commands.add_parser("unpack")
    unpack_parser.add_argument("--parts", type=Path, required=True)
    unpack_parser.add_argument("--workspace", type=Path, required=True)
    unpack_parser.add_argument("--owner")
    args = parser.parse_args(argv)
    if args.command == "pack":
        print(json.dumps(pack(args.workspace, args.out, args.ignore, args.max_bytes, max_seconds=args.max_seconds)))
    else:
        unpack(args.parts, args.workspace, args.owner)
    return 0


if __name__ == "__main__":
    sys.exit(main())
