"""Seeded random workspaces made to break the copy into scoring (issue 46, `sandbox_lib.submission`).

Each seed builds an adversarial tree the way an agent could: folders nested past any recursion limit, 255-byte
names, paths past PATH_MAX (built relative to each folder's descriptor), many small files, sparse files, names with
newlines, undecodable bytes, leading dashes and spaces, named pipes, hard links, and symbolic links (absolute,
escaping, chained, dangling, looping). `pack` must end in parts or a refusal, never an exception, within its time
limit; what it packs must unpack, and every link of the result must resolve inside the unpacked workspace.
"""

from __future__ import annotations

import json
import os
import pwd
import random
import stat
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rebench.sandbox_lib.submission import pack, unpack
from rebench_inspect.runtime.scoring import SUBMISSION_MODULE
from rebench_inspect.runtime.staging import sandbox_command

SEEDS = range(50)
# Bounds below the defaults so that a tree can pass or cross each of them in milliseconds; the defaults are checked
# in test_submission_copy.py.
MAX_BYTES, MAX_SECONDS, MAX_ENTRIES = 8 * 1024**2, 30.0, 400
# Generous: CI runs on a loaded machine; the point is that nothing hangs.
SLACK_S = 30.0
ODD_NAMES = [
    "-rf", "--", " lead", "trail ", "new\nline", "\n", "tab\t", "*", "?[a]", ".hidden", "...", "\\", "é",
    os.fsdecode(b"\xff\xfe undecodable"), "x" * 255,
]  # fmt: skip
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW


def _descend(fd: int, name: str) -> int:
    """The descriptor of folder `name` in `fd`'s folder; `fd` is closed once the child is open."""
    child = os.open(name, _DIR, dir_fd=fd)
    os.close(fd)
    return child


@contextmanager
def _opened(workspace: Path, folder: tuple[str, ...]) -> Iterator[int]:
    """A descriptor of `folder` (names under `workspace`), reached one name at a time: any depth, any length."""
    fd = os.open(workspace, _DIR)
    try:
        for name in folder:
            fd = _descend(fd, name)
        yield fd
    finally:
        os.close(fd)


class Tree:
    """An adversarial workspace built by `steps` random operations, each somewhere in the folders made so far."""

    def __init__(self, workspace: Path, rng: random.Random) -> None:
        self.workspace, self.rng = workspace, rng
        self.folders: list[tuple[str, ...]] = [()]
        self.files: list[tuple[tuple[str, ...], str]] = []
        self.count = 0
        workspace.mkdir(parents=True)

    def name(self, base: str = "n") -> str:
        """`base` made unique, cut to 255 bytes."""
        self.count += 1
        suffix = str(self.count)
        while len(os.fsencode(base + suffix)) > 255:
            base = base[:-1]
        return base + suffix

    def nest(self, folder: tuple[str, ...], depth: int, name_bytes: int) -> None:
        fd = os.open(self.workspace, _DIR)
        try:
            for name in folder:
                fd = _descend(fd, name)
            for _ in range(depth):
                name = self.name("d" * name_bytes)
                os.mkdir(name, dir_fd=fd)
                fd = _descend(fd, name)
                folder = (*folder, name)
                if len(folder) <= 80 and self.rng.random() < 0.2:
                    self.folders.append(folder)
        finally:
            os.close(fd)

    def deep(self, folder: tuple[str, ...]) -> None:
        [depth] = self.rng.choices([3, 10, 30, 70, 1100], weights=[3, 3, 2, 2, 1])  # 1,100: past Python's recursion
        self.nest(folder, depth, self.rng.choice([1, 1, 8, 30, 250]))

    def long_path(self, folder: tuple[str, ...]) -> None:
        self.nest(folder, 20, 250)  # past PATH_MAX (4,096 bytes)

    def write(self, folder: tuple[str, ...], names: list[str], data: bytes) -> None:
        with _opened(self.workspace, folder) as fd:
            for name in names:
                out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
                try:
                    os.write(out, data)
                finally:
                    os.close(out)
                self.files.append((folder, name))

    def many_files(self, folder: tuple[str, ...]) -> None:
        count = self.rng.choice([5, 40, 120, 450])
        self.write(folder, [self.name("f") for _ in range(count)], self.rng.randbytes(self.rng.randrange(64)))

    def sparse(self, folder: tuple[str, ...]) -> None:
        size = self.rng.choice([4096, 64 * 1024, 1024**2, 1024**4])  # the last is over the byte limit
        name = self.name("sparse")
        self.write(folder, [name], b"")
        with _opened(self.workspace, folder) as fd:
            out = os.open(name, os.O_WRONLY, dir_fd=fd)
            os.ftruncate(out, size)
            os.close(out)

    def odd(self, folder: tuple[str, ...]) -> None:
        name = self.name(self.rng.choice(ODD_NAMES))
        if self.rng.random() < 0.5:
            self.write(folder, [name], b"odd\n")
        else:
            with _opened(self.workspace, folder) as fd:
                os.mkdir(name, dir_fd=fd)
            self.folders.append((*folder, name))

    def fifo(self, folder: tuple[str, ...]) -> None:
        with _opened(self.workspace, folder) as fd:
            os.mkfifo(self.name("pipe"), dir_fd=fd)

    def hard_link(self, folder: tuple[str, ...]) -> None:
        if self.files:
            source_folder, source = self.rng.choice(self.files)
            with _opened(self.workspace, source_folder) as source_fd, _opened(self.workspace, folder) as fd:
                os.link(source, self.name("hard"), src_dir_fd=source_fd, dst_dir_fd=fd)

    def short(self, folder: tuple[str, ...]) -> tuple[str, ...]:
        """`folder`, or the top when its path would make a link's target past the kernel's 4,095 bytes."""
        return folder if len(os.fsencode("/".join(folder))) < 1800 else ()

    def link(self, folder: tuple[str, ...]) -> None:
        depth = len(folder)
        up = "../" * depth
        somewhere = "/".join(self.short(self.rng.choice(self.folders))) or "."
        targets = [
            "/etc/passwd", "/", "..", ".", "./", "missing/file", "sub/../../x", f"{up}..", f"{up}../x",
            f"{up}{somewhere}", f"{'../' * self.rng.randint(0, depth)}{somewhere}/..", f"{up}{somewhere}/../..",
        ]  # fmt: skip
        with _opened(self.workspace, folder) as fd:
            os.symlink(self.rng.choice(targets), self.name("link"), dir_fd=fd)

    def chain(self, folder: tuple[str, ...]) -> None:
        """A link climbing back to the workspace from `folder`, and one at the top that climbs further through it."""
        folder = self.short(folder)
        name = self.name("l")
        with _opened(self.workspace, folder) as fd:
            os.symlink("../" * len(folder) or ".", name, dir_fd=fd)
        climb = "/.." * self.rng.randint(1, len(folder) + 2)
        with _opened(self.workspace, ()) as fd:
            os.symlink("/".join((*folder, name)) + climb, self.name("up"), dir_fd=fd)

    def loop(self, folder: tuple[str, ...]) -> None:
        first, second = self.name("loop"), self.name("loop")
        with _opened(self.workspace, folder) as fd:
            os.symlink(second, first, dir_fd=fd)
            os.symlink(first, second, dir_fd=fd)
            itself = self.name("self")
            os.symlink(itself, itself, dir_fd=fd)

    def operations(self) -> dict[Callable[[tuple[str, ...]], None], float]:
        """Each operation and how often it is drawn: the traps that end in a verdict at once less than the others."""
        return {
            self.deep: 2, self.long_path: 0.5, self.many_files: 1, self.sparse: 1, self.odd: 3, self.fifo: 1,
            self.hard_link: 1, self.link: 4, self.chain: 2, self.loop: 1,
        }  # fmt: skip

    def build(self, steps: int) -> Tree:
        operations = self.operations()
        for _ in range(steps):
            operation = self.rng.choices(list(operations), weights=list(operations.values()))[0]
            operation(self.rng.choice(self.folders))
        return self


def _entries(root: Path) -> Iterator[Path]:
    """Every path under `root`, listed without recursion and without following links."""
    stack = [root]
    while stack:
        folder = stack.pop()
        for entry in os.scandir(folder):
            path = Path(entry.path)
            yield path
            if entry.is_dir(follow_symlinks=False):
                stack.append(path)


def _inside(path: Path, root: Path) -> bool:
    resolved = os.path.realpath(path)
    return resolved == str(root) or resolved.startswith(f"{root}/")


def _assert_the_copy_is_sound(workspace: Path, copy: Path, report: dict, owner: str | None) -> None:
    files = 0
    for path in _entries(copy):
        info = os.lstat(path)
        assert stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode) or stat.S_ISLNK(info.st_mode)
        if owner:
            assert info.st_uid == pwd.getpwnam(owner).pw_uid
        if stat.S_ISLNK(info.st_mode):
            assert _inside(path, copy), f"{path} -> {os.readlink(path)} resolves outside the copy"
        elif stat.S_ISREG(info.st_mode):
            files += 1
            assert path.read_bytes() == (workspace / path.relative_to(copy)).read_bytes()
    assert files == report["files"]


@pytest.fixture
def place(tmp_path):
    """tmp_path, emptied by `rm -rf` afterwards (Python's rmtree recurses once per folder)."""
    yield tmp_path
    subprocess.run(["rm", "-rf", str(tmp_path)], check=True)


@pytest.mark.parametrize("seed", SEEDS)
def test_every_random_workspace_packs_to_parts_or_a_verdict_and_unpacks_inside(place, seed):
    rng = random.Random(seed)
    workspace = place / "ws"
    Tree(workspace, rng).build(steps=rng.randint(3, 12))
    ignore = rng.choice([[], ["*.pyc"], ["-*"], ["d*"]])
    started = time.monotonic()
    report = pack(workspace, place / "parts", ignore, MAX_BYTES, max_seconds=MAX_SECONDS, max_entries=MAX_ENTRIES)
    if "too_large" in report:
        assert set(report) == {"too_large"} and isinstance(report["too_large"], str)
        assert os.listdir(place / "parts") == []
    else:
        assert set(report) == {"parts", "files", "bytes", "skipped"}
        owner = "nobody" if os.geteuid() == 0 and rng.random() < 0.5 else None
        unpack(place / "parts", place / "copy", owner=owner)
        _assert_the_copy_is_sound(workspace, place / "copy", report, owner)
    assert time.monotonic() - started < MAX_SECONDS + SLACK_S


def test_the_command_line_packs_a_workspace_of_every_kind_of_trap(place):
    tree = Tree(place / "ws", random.Random(0))
    for operation in tree.operations():
        if operation not in (tree.deep, tree.long_path, tree.many_files, tree.sparse):  # these may end in a verdict
            operation(tree.rng.choice(tree.folders))
    tree.write((), [tree.name(name) for name in ODD_NAMES], b"odd\n")
    arguments = ["pack", "--workspace", str(place / "ws"), "--out", str(place / "parts"), "--max-seconds", "30"]
    command, cwd = sandbox_command(SUBMISSION_MODULE, arguments, python=sys.executable, code_dir=place)
    started = time.monotonic()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=30 + SLACK_S)
    assert done.returncode == 0, done.stderr[-2000:]
    assert time.monotonic() - started < 30 + SLACK_S
    [line] = done.stdout.splitlines()
    report = json.loads(line)
    assert report["files"] >= len(ODD_NAMES) and any("leaves the workspace" in why for why in report["skipped"])
    unpack(place / "parts", place / "copy", owner=None)
    _assert_the_copy_is_sound(place / "ws", place / "copy", report, owner=None)
