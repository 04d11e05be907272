"""The copy of the agent's workspace into the scoring service (`sandbox_lib.submission`): packed by the safe
snapshot in parts, unpacked only as packed. The Docker tier runs it between two containers
(tests/docker/test_scoring_apart.py)."""

import io
import json
import os
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from rebench.sandbox_lib import submission
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
