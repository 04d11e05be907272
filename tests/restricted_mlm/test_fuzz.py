"""Fuzz: malformed export files (report.json, program.json) end in a verdict (issue 21), never a scorer crash.

The agent's code owns the export process, so it can leave anything at the paths the scorer reads: here its model.py
moves a prepared variant over the file when the process exits. Each run exports a model (seconds), so the generated
variants run with `-m slow`; deep nesting in each file (a crash this fuzz found) stays in the fast tier."""

from __future__ import annotations

import pytest

from rebench_inspect.testing import programs
from tests import fuzz_inputs

from .conftest import ENVIRONMENT
from .test_scoring import append_to_model

REPLACE_AT_EXIT = """
import atexit as _atexit, os as _os, sys as _sys
def _replace_export_file():
    target = _os.path.join(_sys.argv[2], {name!r})
    if _os.path.lexists(target):
        _os.unlink(target)
    _os.replace({staged!r}, target)
_atexit.register(_replace_export_file)
"""
VALID_REPORT = {"ok": True, "message": "exported"}
TARGETS = {
    "report.json": fuzz_inputs.file_variants() + fuzz_inputs.json_variants(VALID_REPORT),
    "program.json": fuzz_inputs.file_variants() + fuzz_inputs.json_variants(),
}
FAST = {("report.json", "document-deep-list"), ("program.json", "document-deep-list")}


def _cases() -> list:
    return [
        pytest.param(
            name, variant, id=f"{name}-{variant.name}", marks=() if (name, variant.name) in FAST else pytest.mark.fuzz
        )
        for name, variants in TARGETS.items()
        for variant in variants
    ]


@pytest.mark.parametrize(("name", "variant"), _cases())
def test_malformed_export_files_get_a_verdict(scoring_dirs, tmp_path, name, variant):
    workspace, protected = scoring_dirs
    staged = tmp_path / "variant" / name
    staged.parent.mkdir()
    variant.write(staged)
    append_to_model(workspace, REPLACE_AT_EXIT.format(name=name, staged=str(staged)))
    completed = programs.run_scoring_program(ENVIRONMENT, workspace, protected, timeout=600)
    result = fuzz_inputs.assert_verdict(completed, protected / "result.json")
    assert not result["valid"]
