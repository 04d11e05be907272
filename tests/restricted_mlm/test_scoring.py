"""The scoring program end to end at smoke scale: the start and the reference score; broken submissions are
invalid with a message; attempts to get around the check from the agent's process fail."""

from __future__ import annotations

import shutil
import stat
import textwrap
import time
from pathlib import Path

import pytest

from rebench.restricted_mlm.task import ENVIRONMENT

from .conftest import score_workspace

START_MODEL = "solution/model.py"


def invalid(workspace: Path, protected: Path, **kwargs) -> str:
    result = score_workspace(workspace, protected, **kwargs)
    assert not result["valid"] and result["raw"] is None, result
    return result["message"]


def append_to_model(workspace: Path, code: str) -> None:
    path = workspace / START_MODEL
    path.write_text(path.read_text() + "\n" + textwrap.dedent(code))


def test_start_is_valid_and_records_ops(scoring_dirs):
    workspace, protected = scoring_dirs
    result = score_workspace(workspace, protected)
    assert result["valid"], result
    assert result["raw"] == pytest.approx(ENVIRONMENT.anchors["smoke"].start, abs=0.3)
    ops = result["details"]["ops_seen"]  # allow-listed names only: the scorer's vocabulary
    assert set(ops) == {
        "aten.embedding.default",
        "aten.linear.default",
        "aten.relu.default",
        "aten.view.default",
    }
    assert str(round(result["raw"], 2)) not in result["message"]


def test_reference_is_valid_and_clearly_better(scoring_dirs, reference_result):
    workspace, protected = scoring_dirs
    shutil.copytree(reference_result / "solution", workspace / "solution", dirs_exist_ok=True)
    result = score_workspace(workspace, protected)
    assert result["valid"], result
    assert result["raw"] == pytest.approx(ENVIRONMENT.anchors["smoke"].reference, abs=0.2)
    assert result["raw"] < ENVIRONMENT.anchors["smoke"].start - 0.4
    assert "aten.as_strided.default" in result["details"]["ops_seen"]


@pytest.mark.parametrize(
    ("model_code", "expected"),
    [
        (None, "exporting the model failed"),
        ("def get_trained_model(:\n", "exporting the model failed"),
        ("import torch\n", "exporting the model failed"),
        ("def get_trained_model():\n    return 42\n", "exporting the model failed"),
        (
            "import torch\ndef get_trained_model():\n    return torch.nn.Linear(3, 3)\n",
            "exporting the model failed",
        ),
        ("import os\nos._exit(3)\n", "exporting the model failed"),
    ],
)
def test_broken_submissions_are_invalid_with_a_message(scoring_dirs, model_code, expected):
    """The export process is the agent's: what it prints, raises or exits with is never quoted (check_model.py in
    the workspace shows the agent why)."""
    workspace, protected = scoring_dirs
    if model_code is None:
        (workspace / START_MODEL).unlink()
    else:
        (workspace / START_MODEL).write_text(model_code)
    message = invalid(workspace, protected)
    assert expected in message and "SyntaxError" not in message and "3" not in message


def test_wrong_output_shape_is_invalid(scoring_dirs):
    workspace, protected = scoring_dirs
    append_to_model(
        workspace,
        """
        _trained = get_trained_model
        class Sliced(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = _trained()
            def forward(self, tokens):
                return self.inner(tokens)[:, :, :10]
        def get_trained_model():
            return Sliced()
    """,
    )
    assert "did not return floating-point logits of shape" in invalid(workspace, protected)


def test_a_forbidden_operation_is_refused(scoring_dirs):
    workspace, protected = scoring_dirs
    append_to_model(
        workspace,
        """
        _forward = Model.forward
        Model.forward = lambda self, tokens: torch.softmax(_forward(self, tokens), -1)
    """,
    )
    result = score_workspace(workspace, protected)
    assert not result["valid"] and "operations that are not allowed" in result["message"], result
    assert "softmax" not in result["message"]  # a name from the agent's graph: check_model.py lists them


def test_a_held_out_token_id_in_an_operators_error_is_never_quoted(scoring_dirs):
    """Issue 21: an allowed operator's error quoted a held-out token id ("index 50213 is out of bounds") in the
    verdict. The graph gathers row <first held-out token id> of a one-row table, which fails on held-out data only."""
    workspace, protected = scoring_dirs
    append_to_model(
        workspace,
        """
        _original = get_trained_model
        class _Leak(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.inner = _original()
                self.table = torch.nn.Parameter(torch.zeros(1, 1))
            def forward(self, tokens):
                return self.inner(tokens) + torch.gather(self.table, 0, tokens[:1, :1] + 1).sum()
        def get_trained_model():
            return _Leak()
    """,
    )
    message = invalid(workspace, protected)
    assert message == "running the exported forward pass on a held-out batch failed", message


def test_rewriting_the_exported_files_from_the_agents_process_does_not_help(scoring_dirs, tmp_path):
    """The agent's code owns the export process: it can write any graph and any weights file. A graph naming a
    forbidden operator is refused; a weights file with pickled code is refused without running the code."""
    workspace, protected = scoring_dirs
    marker = tmp_path / "pickle-ran"
    append_to_model(
        workspace,
        """
        import atexit, json, sys
        def _forge():
            out = __import__("pathlib").Path(sys.argv[2])
            program = json.loads((out / "program.json").read_text())
            program["nodes"].append({"name": "sneaky", "op": "aten.exp.default",
                                      "args": [{"node": program["output"]["node"]}], "kwargs": {}})
            program["output"] = {"node": "sneaky"}
            (out / "program.json").write_text(json.dumps(program))
        atexit.register(_forge)
    """,
    )
    assert "not allowed" in invalid(workspace, protected)

    append_to_model(
        workspace,
        f"""
        import atexit, os, pickle
        class _Payload:
            def __reduce__(self):
                return (os.system, ("touch {marker}",))
        def _poison():
            out = __import__("pathlib").Path(sys.argv[2])
            (out / "weights.pt").write_bytes(pickle.dumps({{"x": _Payload()}}))
        atexit.register(_poison)
    """,
    )
    assert "malformed or uses operations that are not allowed" in invalid(workspace, protected)
    assert not marker.exists()


def test_a_daemon_left_behind_cannot_touch_the_files(scoring_dirs, tmp_path):
    """A double-forked daemon that would rewrite the graph later is killed before the files are read."""
    workspace, protected = scoring_dirs
    marker = tmp_path / "daemon-survived"
    append_to_model(
        workspace,
        f"""
        import os, time
        _exporter = os.getpid()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                while os.path.exists(f"/proc/{{_exporter}}"):  # until the export process has ended
                    time.sleep(0.05)
                time.sleep(2)
                open("{marker}", "w").close()
                os._exit(0)
            os._exit(0)
    """,
    )
    result = score_workspace(workspace, protected)
    assert result["valid"], result
    time.sleep(4)
    assert not marker.exists()


def test_the_agents_user_cannot_read_the_held_out_tokens(second_user, second_user_scoring_dirs):
    workspace, protected = second_user_scoring_dirs
    assert stat.S_IMODE(protected.stat().st_mode) == 0o700
    # The export succeeds only when reading the held-out tokens fails with PermissionError (the scorer quotes no
    # exception, so the outcome tells).
    append_to_model(
        workspace,
        f"""
        try:
            open("{protected / "val.bin"}", "rb").read()
        except PermissionError:
            pass
        else:
            raise SystemExit("the held-out tokens were readable")
    """,
    )
    result = score_workspace(workspace, protected, run_as=second_user)
    assert result["valid"], result
