"""Every script in benchmarks/ still starts: `--help` imports all it needs (the shared timing module, the testing
harness it borrows, the environments) and exits 0, so a move of what a script imports breaks a fast test rather than
the next measurement."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SHARED_MODULES = {"timing.py"}  # imported by the scripts, not run
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py") if path.name not in SHARED_MODULES)

# Runs each script as `python benchmarks/NAME --help` would (as __main__, its folder first on sys.path), all in one
# interpreter: the scripts import much the same (torch, Inspect), about 2 s of CPU a process, so one process pays it
# once. Prints {script: [exit status, stdout, stderr]} as JSON.
HELP_EACH_SCRIPT = """
import contextlib, io, json, runpy, sys, traceback
folder, names = sys.argv[1], sys.argv[2:]
sys.path.insert(0, folder)
runs = {}
for name in names:
    stdout, stderr = io.StringIO(), io.StringIO()
    sys.argv = [name, "--help"]
    status = 0
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        try:
            runpy.run_path(f"{folder}/{name}", run_name="__main__")
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        except BaseException:
            traceback.print_exc()
            status = 1
    runs[name] = [status, stdout.getvalue(), stderr.getvalue()]
print(json.dumps(runs))
"""


@pytest.fixture(scope="module")
def help_runs() -> dict[str, list]:
    completed = subprocess.run(
        [sys.executable, "-c", HELP_EACH_SCRIPT, str(BENCHMARKS), *SCRIPTS],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.splitlines()[-1])


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_answers_help(script, help_runs):
    status, stdout, stderr = help_runs[script]
    assert status == 0, stderr[-3000:]
    assert stdout.startswith("usage:"), stdout[-2000:]
