"""The copy of the agent's workspace into the scoring service (`sandbox_lib.submission`): packed by the safe
snapshot in parts, unpacked only as packed. The Docker tier runs it between two containers
(tests/docker/test_scoring_apart.py)."""

import io
import json
import os
import pwd
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rebench.sandbox_lib import snapshot, submission
from rebench.sandbox_lib.snapshot import SnapshotReport
from rebench.sandbox_lib.submission import pack, unpack
from rebench_inspect.runtime.scoring import SUBMISSION_MODULE
from rebench_inspect.runtime.staging import sandbox_command


def _workspace(root: Path) -> Path:
    workspace = root / "ws"
    (workspace / "pkg" / "__pycache__").mkdir(parents=True)
    (workspace / "solution.py").write_text("x = 1\n")
    (workspace / "pkg" / "mod.py").write_text("y = 2\n")
    (workspace / "pkg" / "__pycache__" / "mod.pyc").write_bytes(b"\0")
    (workspace / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(workspace / "run.sh", 0o4777)  # set-uid and world-writable: neither survives the copy
    os.mkfifo(workspace / "pipe")
    (workspace / "secret").symlink_to("/etc/passwd")
    (workspace / "inside").symlink_to("pkg/mod.py")
    return workspace


def test_the_copy_holds_the_workspace_as_the_snapshot_sees_it(tmp_path, monkeypatch):
    monkeypatch.setattr(submission, "PART_BYTES", 1000)  # several parts, joined in order
    workspace = _workspace(tmp_path)
    (workspace / "big.bin").write_bytes(os.urandom(5000))
    parts, copy = tmp_path / "parts", tmp_path / "copy"
    report = pack(workspace, parts, ignore=["__pycache__"], max_bytes=10**6)
    assert len(report["parts"]) > 3 and sorted(os.listdir(parts)) == report["parts"]  # no snapshot left beside them
    assert any("secret" in skipped for skipped in report["skipped"])
    assert any("pipe" in skipped for skipped in report["skipped"])
    unpack(parts, copy, owner=None)
    assert not parts.exists()
    names = sorted(str(path.relative_to(copy)) for path in copy.rglob("*"))
    assert names == ["big.bin", "inside", "pkg", "pkg/mod.py", "run.sh", "solution.py"]
    assert (copy / "big.bin").read_bytes() == (workspace / "big.bin").read_bytes()
    assert os.readlink(copy / "inside") == "pkg/mod.py"
    assert stat.S_IMODE(os.stat(copy / "run.sh").st_mode) == 0o755


def test_a_workspace_past_the_limit_is_refused_not_copied(tmp_path):
    workspace = _workspace(tmp_path)
    (workspace / "big.bin").write_bytes(b"\0" * 5000)
    report = pack(workspace, tmp_path / "parts", ignore=[], max_bytes=1000)
    assert "more than 1000 bytes" in report["too_large"]
    assert os.listdir(tmp_path / "parts") == []


def _tar_with(member: tarfile.TarInfo, data: bytes = b"") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(member, io.BytesIO(data) if member.isreg() else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "", size: int = 0) -> tarfile.TarInfo:
    member = tarfile.TarInfo(name)
    member.type, member.linkname, member.size = kind, link, size
    return member


@pytest.mark.parametrize(
    "member",
    [
        _member("../outside.txt", size=1),
        _member("chain", tarfile.SYMTYPE, link="a/b/c/l/../../.."),
        _member("/tmp/absolute.txt", size=1),
        _member("escape", tarfile.SYMTYPE, link="/protected/data"),
        _member("up", tarfile.SYMTYPE, link="../../etc/passwd"),
        _member("hard", tarfile.LNKTYPE, link="/etc/passwd"),
        _member("fifo", tarfile.FIFOTYPE),
        _member("device", tarfile.CHRTYPE),
    ],
    ids=lambda member: member.name,
)
def test_unpack_takes_only_what_pack_writes(tmp_path, member):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part-00000").write_bytes(_tar_with(member, b"x" * member.size))
    with pytest.raises(ValueError, match="submission"):
        unpack(parts, tmp_path / "ws" / "copy", owner=None)
    assert not (tmp_path / "outside.txt").exists() and not (tmp_path / "ws" / "copy" / member.name).exists()


def test_the_command_line_prints_one_json_report(tmp_path):
    workspace = _workspace(tmp_path)
    arguments = ["pack", "--workspace", str(workspace), "--out", str(tmp_path / "parts"), "--ignore", "*.pyc"]
    command, cwd = sandbox_command(SUBMISSION_MODULE, arguments, python=sys.executable, code_dir=tmp_path)
    out = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=True).stdout
    report = json.loads(out)
    assert report["files"] == 3 and report["parts"] == ["part-00000"]


# ------------------------------------------------------------------------------------------------ bounds (issue 46)
@pytest.fixture
def deep_tmp(tmp_path):
    """tmp_path, emptied by `rm -rf` afterwards: Python's rmtree recurses once per folder, as the copy once did."""
    yield tmp_path
    subprocess.run(["rm", "-rf", str(tmp_path)], check=True)


def _nest(workspace: Path, names: list[str]) -> None:
    """Folders `names[0]/names[1]/...` made relative to each parent's descriptor: a path of any length."""
    workspace.mkdir(exist_ok=True)
    fd = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for name in names:
            os.mkdir(name, dir_fd=fd)
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def test_folders_nested_past_the_depth_bound_are_a_verdict(deep_tmp):
    """1,100 nested folders once overflowed the copy's recursion (RecursionError: the sample errored)."""
    _nest(deep_tmp / "ws", ["d"] * 1100)
    report = pack(deep_tmp / "ws", deep_tmp / "parts", ignore=[], max_bytes=10**6)
    assert report == {"too_large": f"the workspace nests folders more than {snapshot.DEFAULT_MAX_DEPTH} deep"}
    assert os.listdir(deep_tmp / "parts") == []


def test_a_path_past_the_length_bound_is_a_verdict(deep_tmp):
    """A path of 4,422 bytes (22 folders of 200-byte names) once failed the copy's mkdir (ENAMETOOLONG)."""
    _nest(deep_tmp / "ws", [f"{index:02d}" + "n" * 198 for index in range(22)])
    report = pack(deep_tmp / "ws", deep_tmp / "parts", ignore=[], max_bytes=10**6)
    assert report == {"too_large": f"the workspace holds a path longer than {snapshot.DEFAULT_MAX_PATH_BYTES} bytes"}


def test_more_entries_than_the_bound_are_a_verdict(tmp_path):
    """150,000 empty files passed the copy's byte limit, then took too long to archive and unpack."""
    workspace = tmp_path / "ws"
    (workspace / "pkg").mkdir(parents=True)
    for index in range(20):
        (workspace / "pkg" / f"{index}.py").write_text("")
    report = pack(workspace, tmp_path / "parts", ignore=[], max_bytes=10**6, max_entries=20)  # 20 files, a folder
    assert report == {"too_large": "the workspace holds more than 20 files, folders and links to score"}
    assert pack(workspace, tmp_path / "fits", ignore=[], max_bytes=10**6, max_entries=21)["files"] == 20
    assert pack(workspace, tmp_path / "fewer", ignore=["pkg"], max_bytes=10**6, max_entries=1)["files"] == 0


def test_the_command_line_packs_under_the_default_bounds(tmp_path, monkeypatch, capsys):
    limits_used = []

    def walk(workspace, sink, root, limits, ignore):
        limits_used.append(limits)
        return SnapshotReport()

    monkeypatch.setattr(submission, "walk", walk)
    workspace = _workspace(tmp_path)
    assert submission.main(["pack", "--workspace", str(workspace), "--out", str(tmp_path / "parts")]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == 0
    assert limits_used == [snapshot.Limits()]
    assert (snapshot.DEFAULT_MAX_ENTRIES, snapshot.DEFAULT_MAX_DEPTH, snapshot.DEFAULT_MAX_PATH_BYTES) == (
        100_000,
        64,
        1024,
    )
    assert snapshot.Limits() == snapshot.Limits(
        max_bytes=4 * 1024**3, max_seconds=120, max_entries=100_000, max_depth=64, max_path_bytes=1024
    )
    submission.main(["pack", "--workspace", str(workspace), "--out", str(tmp_path / "more"), "--max-seconds", "7.5"])
    assert limits_used[-1] == snapshot.Limits(max_seconds=7.5)


def _chain(workspace: Path) -> None:
    """Two links, each inside on its own: `l` goes up to the workspace from a/b/c; `up` names a/b/c/l/../../..,
    lexically `a`, but the kernel follows `l` first, then climbs three more folders: out of the workspace."""
    (workspace / "a" / "b" / "c").mkdir(parents=True)
    (workspace / "a" / "b" / "c" / "l").symlink_to("../../..")
    (workspace / "up").symlink_to("a/b/c/l/../../..")
    (workspace / "solution.py").write_text("x = 1\n")


def test_a_chain_of_links_that_leaves_is_left_out_and_refused(tmp_path):
    workspace, parts = tmp_path / "one" / "two" / "ws", tmp_path / "parts"
    _chain(workspace)
    assert os.path.realpath(workspace / "up") == str(tmp_path)  # the escape is real: three folders above ws
    report = pack(workspace, parts, ignore=[], max_bytes=10**6)
    assert report["skipped"] == ["up (a link that leaves the workspace)"]
    with tarfile.open(parts / "part-00000") as archive:
        assert archive.getnames() == ["a", "a/b", "a/b/c", "a/b/c/l", "solution.py"]
    unpack(parts, tmp_path / "copy", owner=None)
    assert os.readlink(tmp_path / "copy" / "a" / "b" / "c" / "l") == "../../.."
    assert not os.path.lexists(tmp_path / "copy" / "up")


@pytest.mark.parametrize(
    ("relative", "target", "inside"),
    [
        ("a/b/c/l", "../../..", True),
        ("a/b/c/l", "../../../..", False),
        ("up", "a/b/c/l/../../..", False),  # `..` after a name that may be a link
        ("a/x", "../b/./c", True),
        ("a/x", "./../b", True),
        ("a/x", "b/..", False),
        ("x", "/etc/passwd", False),
        ("x", "..", False),
        ("x", "sub//file", True),
    ],
)
def test_a_link_stays_inside_when_it_only_climbs_first_and_no_higher_than_itself(relative, target, inside):
    assert snapshot.link_stays_inside(relative, target) is inside


def test_unpack_refuses_a_member_under_a_link_written_before_it(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.addfile(_member("sub", tarfile.DIRTYPE))
        archive.addfile(_member("l", tarfile.SYMTYPE, link="sub"))
        archive.addfile(_member("l/x", size=1), io.BytesIO(b"x"))
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "part-00000").write_bytes(buffer.getvalue())
    with pytest.raises(ValueError, match="submission"):
        unpack(parts, tmp_path / "copy", owner=None)
    assert not (tmp_path / "copy" / "sub" / "x").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user takes root")
def test_unpack_gives_a_deep_tree_to_its_owner_without_recursion(deep_tmp):
    """Unpack once gave the files to their owner by os.walk, which recurses once per folder (Python 3.11)."""
    buffer = io.BytesIO()
    names = ["/".join(["d"] * depth) for depth in range(1, 1101)]
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as archive:
        for name in names:
            archive.addfile(_member(name, tarfile.DIRTYPE))
        archive.addfile(_member(f"{names[-1]}/file", size=1), io.BytesIO(b"x"))
        archive.addfile(_member(f"{names[-1]}/link", tarfile.SYMTYPE, link="file"))
    parts = deep_tmp / "parts"
    parts.mkdir()
    (parts / "part-00000").write_bytes(buffer.getvalue())
    unpack(parts, deep_tmp / "copy", owner="nobody")
    nobody = pwd.getpwnam("nobody").pw_uid
    deepest = deep_tmp / "copy" / names[-1]
    assert os.lstat(deepest / "link").st_uid == os.stat(deepest / "file").st_uid == nobody
    assert os.stat(deep_tmp / "copy" / "d").st_uid == os.stat(deep_tmp / "copy").st_uid == nobody
