"""Issue 21: verdicts use a fixed vocabulary (docs/CONTRACT.md, "Verdicts use a fixed vocabulary").

A scorer quoted text the agent's code produced (a tensor name, an exception message, an exit status) in what it
returned; nothing stopped a 30 MB message. Now every message is a `Reason` written as a literal in the scoring code,
its fields numbers, and `write_result` and the host refuse or cap the rest. The per-environment attack tests (a
name in a weights file, an operator's error quoting held-out tokens, an exit status, the judge's error text) sit
beside each environment's scorer tests."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import pytest

from rebench.sandbox_lib import InfrastructureError, Invalid, Reason, Scored
from rebench.sandbox_lib.result import MAX_DETAILS_BYTES, MAX_MESSAGE_CHARS, write_result
from rebench_inspect.runtime.scoring import ScoringProgramResult

TASKS = Path(__file__).resolve().parents[2] / "tasks"
# Everything staged to run at scoring time: the environments' scorer folders and the shared library.
SCORING_CODE = sorted(
    path for path in TASKS.rglob("*.py") if path.parent.name in ("sandbox", "sandbox_lib")
)
HELD_OUT = "HELDOUT the quick brown fox, row 17 of the held-out file"


# ------------------------------------------------------------------------------------------------ static rules
def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    def called(node: ast.Call) -> str | None:
        return node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)

    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and called(node) == name]


def is_free_text(node: ast.expr) -> bool:
    """An expression that makes text at run time: a string, an f-string, a concatenation, str(...) or "".format."""
    if isinstance(node, ast.Constant | ast.JoinedStr | ast.BinOp):
        return True
    if isinstance(node, ast.Call):
        function = node.func
        if isinstance(function, ast.Name) and function.id in ("str", "repr", "format"):
            return True
        if isinstance(function, ast.Attribute) and isinstance(function.value, ast.Constant | ast.JoinedStr):
            return True
    return False


def test_the_scoring_code_is_found():
    names = {path.name for path in SCORING_CODE}
    assert {"result.py", "program.py", "safetensors_weights.py", "chat_common.py", "rust_evaluator.py"} <= names
    assert len({path.parent.parent.name for path in SCORING_CODE if path.parent.name != "sandbox_lib"}) == 7


@pytest.mark.parametrize("path", SCORING_CODE, ids=lambda path: str(path.relative_to(TASKS)))
def test_every_reason_is_a_literal_and_every_verdict_a_reason(path):
    tree = ast.parse(path.read_text())
    for node in calls(tree, "Reason"):
        if path.name == "result.py" and len(node.args) == 2:  # Reason.format's own filled copy
            continue
        literal = len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Constant)
        assert literal and isinstance(node.args[0].value, str), f"{path.name}:{node.lineno}: Reason takes a literal"
    for name in ("Invalid", "InfrastructureError"):
        for node in calls(tree, name):
            if path.name == "graph_program.py":  # check_model.py's own messages, never a verdict (see score.py)
                continue
            assert node.args and not is_free_text(node.args[0]), f"{path.name}:{node.lineno}: {name} takes a Reason"
    for node in calls(tree, "Scored"):
        message = node.args[1] if len(node.args) > 1 else next(k.value for k in node.keywords if k.arg == "message")
        assert not is_free_text(message), f"{path.name}:{node.lineno}: Scored's message is a Reason"


def refusal_codes(path: Path, exception: str) -> set[str]:
    return {
        node.args[0].value
        for node in calls(ast.parse(path.read_text()), exception)
        if node.args and isinstance(node.args[0], ast.Constant)
    }


def table_keys(path: Path, table: str) -> set[str]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == table for t in node.targets):
            return {key.value for key in node.value.keys}  # type: ignore[attr-defined]
    raise AssertionError(f"no {table} in {path}")


@pytest.mark.parametrize(
    ("raiser", "exception", "sayer", "table"),
    [
        ("sandbox_lib/weights.py", "Refused", "sandbox_lib/checkpoints.py", "REFUSALS"),
        (
            "optimize_llm_foundry/sandbox/safetensors_weights.py",
            "BadWeights",
            "optimize_llm_foundry/sandbox/score.py",
            "BAD_WEIGHTS",
        ),
        (
            "restricted_mlm/sandbox/evaluate_program.py",
            "Refused",
            "restricted_mlm/sandbox/score.py",
            "EVALUATION_REFUSALS",
        ),
        ("scaling_law/sandbox/answer_rules.py", "InvalidAnswer", "scaling_law/sandbox/score.py", "REFUSALS"),
        ("scaling_law/sandbox/score.py", "InvalidAnswer", "scaling_law/sandbox/score.py", "REFUSALS"),
    ],
)
def test_every_refusal_code_has_the_scorers_sentence(raiser, exception, sayer, table):
    """Helpers that run beside untrusted data (or in the agent's process) report codes; the scorer has a sentence
    for each one."""
    codes = refusal_codes(TASKS / raiser, exception)
    assert codes and codes <= table_keys(TASKS / sayer, table)


# ------------------------------------------------------------------------------------------------ Reason
def test_a_reason_takes_only_numbers_booleans_and_other_reasons():
    too_slow = Reason("ran past the {limit_s:.0f} s limit in {step}")
    assert str(too_slow.format(limit_s=600.4, step=Reason("the export"))) == "ran past the 600 s limit in the export"
    for value in (HELD_OUT, b"bytes", ["list"], math.nan, math.inf, None, Path("/protected/val.bin")):
        with pytest.raises(TypeError):
            too_slow.format(limit_s=value, step=Reason("x"))
    with pytest.raises(TypeError):
        too_slow.format(limit_s=1)  # every field filled, no more, no fewer
    with pytest.raises(TypeError):
        str(too_slow)  # an unfilled Reason is not a message


@pytest.mark.parametrize("template", ["{0}", "{}", "{x.attribute}", "{x[0]}", "{x!r}", "{x:{width}}", 5, None])
def test_a_reason_template_has_only_plain_named_fields(template):
    with pytest.raises((TypeError, ValueError)):
        Reason(template)


def test_invalid_scored_and_infrastructure_errors_refuse_free_text():
    with pytest.raises(TypeError):
        Invalid(HELD_OUT)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        InfrastructureError(f"the judge failed: {HELD_OUT}")  # type: ignore[arg-type]
    assert str(Invalid(Reason("{count} outputs are wrong"), count=3)) == "3 outputs are wrong"


# ------------------------------------------------------------------------------------------------ the writer
def written(tmp_path: Path, **kwargs) -> dict:
    write_result(tmp_path / "result.json", **{"valid": False, "raw": None, "message": Reason("no"), **kwargs})
    return json.loads((tmp_path / "result.json").read_text())


def test_the_writer_refuses_free_text_in_the_message_and_the_details(tmp_path):
    for message in (HELD_OUT, "x" * 30_000_000):  # the 30 MB message of the issue
        with pytest.raises(TypeError):
            written(tmp_path, message=message)
    for details in (
        {"stderr": HELD_OUT},
        {"names": [HELD_OUT]},
        {HELD_OUT: 1},  # a key is the scorer's identifier, not a name from a file
        {"nested": {"deeper": {"and": {"deeper": {"still": [1]}}}}},
        {"object": object()},
    ):
        with pytest.raises(TypeError):
            written(tmp_path, details=details)
    assert not (tmp_path / "result.json").exists()  # nothing was written: the sample errors


def test_the_writer_keeps_numbers_reasons_and_digests_and_caps_the_size(tmp_path):
    details = {"loss": 2.5, "seconds": math.inf, "ok": True, "none": None, "outcome": Reason("passed"),
               "checkpoint_sha256": "ab" * 32, "per_problem": [{"tests_passed": 3}]}
    result = written(tmp_path, valid=True, raw=1.0, message=Reason("fine"), details=details)
    assert result["details"] == {**details, "seconds": None, "outcome": "passed"} and result["message"] == "fine"
    huge = written(tmp_path, details={"trials_ms": [1.0] * MAX_DETAILS_BYTES})
    assert len(json.dumps(huge["details"])) < 200 and "details_left_out" in huge["details"]
    long_message = Reason("{n}" * 300).format(n=10**20)  # a Reason's own text is cut at the cap
    assert len(written(tmp_path, message=long_message)["message"]) == MAX_MESSAGE_CHARS


def test_a_non_finite_score_is_invalid_with_the_scorers_sentence(tmp_path):
    result = written(tmp_path, valid=True, raw=math.nan, message=Reason("measured"))
    assert result == {"valid": False, "raw": None, "message": "the score is not a finite number", "details": {}}


def test_scored_keeps_its_reason():
    assert str(Scored(1.0, Reason("measured")).message) == "measured"


# ------------------------------------------------------------------------------------------------ the host
def test_the_host_caps_whatever_a_scoring_program_wrote():
    """Defence in depth: a scorer that bypassed the library still cannot hand the agent or the log 30 MB."""
    result = ScoringProgramResult.model_validate_json(
        json.dumps({"valid": False, "message": "x" * 30_000_000, "details": {"stderr": "y" * 30_000_000}})
    )
    assert len(result.message) <= 1000 and len(json.dumps(result.details)) < 200
