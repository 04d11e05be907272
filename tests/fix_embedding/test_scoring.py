"""The scoring program on the corrupted model, the reference result, and bad submissions."""

from __future__ import annotations

import json
import math
import os
import pickle
import random
import shutil
import stat
from pathlib import Path

import pytest
import torch

from .conftest import score_workspace


def load_state(workspace: Path) -> dict:
    return torch.load(workspace / "large_model.pth", weights_only=True)


def test_corrupted_model_is_the_first_entry(scoring_dirs):
    workspace, protected = scoring_dirs
    meta = json.loads((protected / "meta.json").read_text())
    result = score_workspace(workspace, protected)
    assert result["valid"], result
    assert result["raw"] == pytest.approx(meta["losses"]["corrupted_large"], rel=1e-5)
    assert f"{result['raw']:.3f}" not in result["message"] and f"{result['raw']:.2f}" not in result["message"]


@pytest.mark.slow  # runs reference/solve.sh (training) on a cold cache
def test_reference_clearly_beats_the_start(scoring_dirs, reference_result):
    workspace, protected = scoring_dirs
    meta = json.loads((protected / "meta.json").read_text())
    shutil.copyfile(reference_result / "fixed_model.pth", workspace / "fixed_model.pth")
    result = score_workspace(workspace, protected)
    assert result["valid"], result
    start = meta["losses"]["corrupted_large"]
    assert math.log(result["raw"] - 1.5) < math.log(start - 1.5) - 0.5
    assert result["raw"] < meta["losses"]["small"] + 0.3


def test_plain_state_dict_with_compile_prefix_is_accepted(scoring_dirs):
    workspace, protected = scoring_dirs
    state = load_state(workspace)["model"]
    torch.save({f"_orig_mod.{k}": v for k, v in state.items()}, workspace / "fixed_model.pth")
    result = score_workspace(workspace, protected)
    assert result["valid"], result


class WritesMarker:
    """A pickled object whose unpickling would run code (create a file)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def invalid(workspace: Path, protected: Path) -> str:
    result = score_workspace(workspace, protected)
    assert result["valid"] is False and result["raw"] is None, result
    return result["message"]


def test_missing_file(scoring_dirs):
    workspace, protected = scoring_dirs
    (workspace / "fixed_model.pth").unlink()
    assert "not found" in invalid(workspace, protected)


def test_pickled_code_is_never_executed(scoring_dirs, tmp_path):
    workspace, protected = scoring_dirs
    marker = tmp_path / "pwned"
    state = load_state(workspace)
    state["payload"] = WritesMarker(marker)
    with open(workspace / "fixed_model.pth", "wb") as f:
        pickle.dump(state, f)  # a legacy pickle with a code-running object
    assert "weights only" in invalid(workspace, protected)
    torch.save({"model": load_state(workspace)["model"], "extra": WritesMarker(marker)}, workspace / "fixed_model.pth")
    assert "weights only" in invalid(workspace, protected)
    assert not marker.exists()


def test_wrong_architecture(scoring_dirs):
    workspace, protected = scoring_dirs
    shutil.copyfile(workspace / "small_correct_model.pth", workspace / "fixed_model.pth")
    assert "architecture" in invalid(workspace, protected)
    state = load_state(workspace)
    state["model"]["transformer.HELDOUT_line.weight"] = torch.zeros(3)
    torch.save(state, workspace / "fixed_model.pth")
    message = invalid(workspace, protected)
    assert "parameter names differ" in message and "HELDOUT" not in message  # never a name from the file


def test_wrong_dtype_and_untied_embedding(scoring_dirs):
    workspace, protected = scoring_dirs
    state = load_state(workspace)
    torch.save({"model": {k: v.to(torch.bfloat16) for k, v in state["model"].items()}}, workspace / "fixed_model.pth")
    assert "dtype" in invalid(workspace, protected)
    untied = dict(state["model"])
    untied["lm_head.weight"] = untied["lm_head.weight"].clone() + 1.0
    torch.save({"model": untied}, workspace / "fixed_model.pth")
    assert "tied" in invalid(workspace, protected)


def test_nan_weights(scoring_dirs):
    workspace, protected = scoring_dirs
    state = load_state(workspace)
    state["model"]["transformer.h.0.mlp.c_fc.weight"][0, 0] = float("nan")
    torch.save(state, workspace / "fixed_model.pth")
    assert "NaN" in invalid(workspace, protected)


def test_corrupted_and_odd_files(scoring_dirs):
    workspace, protected = scoring_dirs
    data = (workspace / "fixed_model.pth").read_bytes()
    (workspace / "fixed_model.pth").write_bytes(data[: len(data) // 2])
    assert "corrupted" in invalid(workspace, protected)
    (workspace / "fixed_model.pth").write_bytes(random.Random(0).randbytes(5000))  # fixed: some draws fail otherwise
    assert "cannot be loaded" in invalid(workspace, protected)
    torch.save([1, 2, 3], workspace / "fixed_model.pth")
    assert "no state dict" in invalid(workspace, protected)
    (workspace / "fixed_model.pth").unlink()
    (workspace / "fixed_model.pth").mkdir()
    assert "directory" in invalid(workspace, protected)


def test_run_as_user_cannot_read_protected_files(second_user, second_user_scoring_dirs):
    """With --run-as, the agent's file is opened as that user: a link to the held-out tokens fails."""
    workspace, protected = second_user_scoring_dirs
    assert stat.S_IMODE(protected.stat().st_mode) == 0o700
    result = score_workspace(workspace, protected, run_as=second_user)
    assert result["valid"], result
    (workspace / "fixed_model.pth").unlink()
    os.symlink(protected / "val.bin", workspace / "fixed_model.pth")
    result = score_workspace(workspace, protected, run_as=second_user)
    assert not result["valid"] and "symbolic link" in result["message"], result
