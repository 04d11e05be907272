"""Every script in benchmarks/ still starts: `--help` imports all it needs (the shared timing module, the testing
harness it borrows, the environments) and exits 0, so a move of what a script imports breaks a fast test rather than
the next measurement."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SHARED_MODULES = {"timing.py"}  # imported by the scripts, not run
SCRIPTS = sorted(path.name for path in BENCHMARKS.glob("*.py") if path.name not in SHARED_MODULES)


@pytest.fixture(scope="module")
def help_runs() -> Iterator[dict[str, subprocess.CompletedProcess]]:
    """Each script's `--help`, all started at once: each spends its seconds importing, so they overlap well."""
    started = {
        name: subprocess.Popen(
            [sys.executable, str(BENCHMARKS / name), "--help"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in SCRIPTS
    }
    try:
        runs = {}
        for name, process in started.items():
            stdout, stderr = process.communicate(timeout=120)
            runs[name] = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
        yield runs
    finally:
        for process in started.values():
            process.kill()


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_script_answers_help(script, help_runs):
    completed = help_runs[script]
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.startswith("usage:"), completed.stdout[-2000:]
