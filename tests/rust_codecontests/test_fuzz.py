"""Fuzz: a malformed result file from the agent's module ends in a verdict (issue 21), never a scorer crash.

The module (run by generate_runner.py, which writes the result file the scorer reads) moves a prepared variant over
that file at import and exits at once, so the scorer reads exactly the variant: a folder, a pipe, a link, a sparse
giant, or hostile JSON."""

import pytest

from tests import fuzz_inputs

from .conftest import FakeOpenAI, make_env, run_scoring

REPLACE_RESULT_FILE = """
import os, sys
out = sys.argv[sys.argv.index("--out") + 1]
os.replace(open("variant_path.txt").read(), out)
os._exit(0)
"""
VALID_RESULTS = {"results": {}, "import_error": None}


@pytest.mark.parametrize(
    "variant", fuzz_inputs.params(fuzz_inputs.file_variants() + fuzz_inputs.json_variants(VALID_RESULTS))
)
def test_malformed_result_files_get_a_verdict(tmp_path, variant):
    workspace, protected = make_env(tmp_path, REPLACE_RESULT_FILE)
    staged = tmp_path / "variant" / "results.json"
    staged.parent.mkdir()
    variant.write(staged)
    (workspace / "variant_path.txt").write_text(str(staged))
    with FakeOpenAI() as server:
        completed = run_scoring(workspace, protected, server.env, timeout=300)
    fuzz_inputs.assert_verdict(completed, protected / "result.json")
