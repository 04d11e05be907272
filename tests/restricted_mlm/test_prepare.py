"""prepare.py under sandbox_lib.Preparation: a second run changes nothing (the starting model is not retrained),
and task setup never builds the full-scale data."""

from __future__ import annotations

import pytest

from rebench.restricted_mlm.sandbox import prepare


def test_preparing_twice_changes_nothing(scoring_dirs):
    workspace, protected = scoring_dirs
    model = workspace / "solution" / "basic_model.pt"
    before = {path: path.stat().st_mtime_ns for path in (model, protected / "meta.json", protected / "val.bin")}
    outcome = prepare.PREPARATION.prepare("smoke", workspace, protected, setup=True)
    assert outcome == "already prepared"
    assert {path: path.stat().st_mtime_ns for path in before} == before


def test_task_setup_never_builds_full_scale_data(tmp_path):
    workspace, protected = tmp_path / "workspace", tmp_path / "protected"
    with pytest.raises(SystemExit, match="full-scale assets are built into the image"):
        prepare.PREPARATION.prepare("full", workspace, protected, setup=True)
    assert not (workspace / "data" / "train.bin").exists()
