"""The rust_codecontests scoring program at smoke scale, with the offline scaffold model behind a fake endpoint.

Scenarios are scored once per module, two at a time (each is a real scoring program: own processes, rustc);
each test then checks its own result. Runs here are as root without `--run-as` (no other user can reach the
toolchain on this machine), so the defences under test are the ones that hold even then: process separation,
fresh staging, stripped records, string-only results, time caps and the process sweep; the user-switching test
runs only where an unprivileged user can execute Python and rustc.
"""

import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from rebench.rust_codecontests.smoke_model import DIFFICULTY, SOLUTIONS

from .conftest import (
    HACKS,
    REFERENCE_SOLUTION,
    START_SOLUTION,
    TASK,
    FakeOpenAI,
    make_env,
    score_workspace,
)

FAST_CAPS = {"REBENCH_RUST_BATCH_TIMEOUT_S": "6", "REBENCH_RUST_TOTAL_TIMEOUT_S": "10"}
SMOKE_PROBLEMS = json.loads((TASK / "sandbox" / "smoke_problems.json").read_text())
TEST_NAMES = [p["name"] for p in SMOKE_PROBLEMS if p["split"] == "test"]


def _answer_module() -> str:
    by_name = {p["name"]: SOLUTIONS[p["title"]] for p in SMOKE_PROBLEMS if p["title"] in SOLUTIONS}
    return f"SOURCES = {by_name!r}\n\ndef correct_program(problem):\n    return SOURCES.get(problem['name'], '')\n"


def _scenario(name: str, root: Path) -> dict:
    """Score one scenario against its own fake endpoint (so the completions it served are this run's only)."""
    server = FakeOpenAI(max_calls=3 if name == "reference_budget_exhausted" else None)
    extra_env: dict[str, str] = {}
    try:
        if name == "start":
            workspace, protected = make_env(root, START_SOLUTION)
        elif name in ("reference", "reference_budget_exhausted"):
            workspace, protected = make_env(root, REFERENCE_SOLUTION)
        elif name == "missing_module":
            workspace, protected = make_env(root, None)
            (workspace / "solution.py").unlink()
        elif name == "import_error":
            workspace, protected = make_env(root, "import definitely_not_a_module\n")
        elif name in ("non_strings", "handwritten"):
            workspace, protected = make_env(root, HACKS / f"{name}.py")
            (workspace / "rebench_smoke_answer.py").write_text(_answer_module())
        elif name == "spawn_daemon":
            workspace, protected = make_env(root, HACKS / "spawn_daemon.py")
            (root / "marker").mkdir()
            (workspace / "marker_dir.txt").write_text(str(root / "marker"))
        elif name == "leak_solutions":
            workspace, protected = make_env(root, HACKS / "leak_solutions.py")
            (root / "reports.jsonl").touch(mode=0o666)
            (workspace / "leak_file.txt").write_text(str(root / "reports.jsonl"))
        elif name == "leak_everything":
            workspace, protected = make_env(root, HACKS / "leak_everything.py")
            shared = root / "shared"
            shared.mkdir(mode=0o777)
            drop = root / "drop.txt"
            drop.touch(mode=0o666)
            (workspace / "leak_dir.txt").write_text(str(shared))
            (workspace / "drop_file.txt").write_text(str(drop))
        elif name == "hanging":
            workspace, protected = make_env(root, HACKS / "hanging.py")
            extra_env = FAST_CAPS
        else:
            workspace, protected = make_env(root, HACKS / f"{name}.py")
        started = time.monotonic()
        result = score_workspace(workspace, protected, {**server.env, **extra_env})
        result["elapsed"] = time.monotonic() - started
        result["root"] = str(root)
        result["server"] = {"calls": server.calls, "refused": server.refused, "unauthorised": server.unauthorised}
        return result
    finally:
        server.close()


SCENARIOS = ["start", "reference", "reference_budget_exhausted", "missing_module", "import_error",
             "patch_evaluator", "leak_solutions", "non_strings", "hanging", "spawn_daemon", "handwritten",
             "echo_handwritten", "no_key", "leak_everything"]


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    base = Path(tempfile.mkdtemp(prefix="rust-scoring-tests-"))
    try:
        # patch_evaluator rewrites every evaluator it can reach: run it alone, after the others.
        ordered = [s for s in SCENARIOS if s != "patch_evaluator"]
        with ThreadPoolExecutor(max_workers=2) as pool:
            out = dict(zip(ordered, pool.map(lambda s: _scenario(s, base / s), ordered)))
        out["patch_evaluator"] = _scenario("patch_evaluator", base / "patch_evaluator")
        # Score the reference again afterwards: fresh staging undoes any patched file.
        out["reference_after_patch"] = _scenario("reference", base / "reference_after_patch")
        yield out
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _outcomes(result: dict) -> dict[str, str]:
    """Each held-out problem's outcome: `details` list them in the problems' order, without names."""
    return dict(zip(TEST_NAMES, (p["outcome"] for p in result["details"]["problems"]), strict=True))


def test_start_and_reference_anchor_values(results):
    start, reference = results["start"], results["reference"]
    assert start["valid"] and reference["valid"]
    # The paper's start returns the model's whole answer (prose and a fenced block): nothing compiles, as in the paper.
    assert start["raw"] == 0.0
    assert set(_outcomes(start).values()) == {"compile_error"}
    assert reference["raw"] == pytest.approx(6 / 8)
    assert start["details"]["total"] == 8
    assert start["details"]["programs_from_model"] == 8 == reference["details"]["programs_from_model"]
    assert "0.75" not in reference["message"] and "6/8" not in reference["message"]
    assert abs(reference["details"]["stderr"] - (0.75 * 0.25 / 8) ** 0.5) < 1e-9


def test_per_problem_outcomes_cover_each_failure_kind(results):
    outcomes = _outcomes(results["reference"])
    assert outcomes["smoke_sum_of_pairs"] == "passed"
    assert outcomes["smoke_prime_queries"] == "timeout"  # passes public tests, too slow on private
    assert outcomes["smoke_bracket_balance"] == "wrong_answer"  # passes public tests, wrong on private
    solved = {n for n, o in outcomes.items() if o == "passed"}
    assert solved == {n for n in TEST_NAMES if DIFFICULTY[next(p["title"] for p in SMOKE_PROBLEMS
                                                                if p["name"] == n)] is not None}


def test_budget_exhaustion_fails_calls_but_scoring_goes_on(results):
    result = results["reference_budget_exhausted"]
    assert result["valid"]
    assert result["server"]["refused"] > 0
    assert result["raw"] < results["reference"]["raw"]


def test_missing_or_broken_module_is_invalid(results):
    assert results["missing_module"]["valid"] is False
    assert "solution.py" in results["missing_module"]["message"]
    assert results["import_error"]["valid"] is False
    # the import error's text is the module's: never quoted
    assert "could not import solution.py" in results["import_error"]["message"]
    assert "definitely_not_a_module" not in json.dumps(results["import_error"])


def test_patching_the_evaluator_does_not_help(results):
    result = results["patch_evaluator"]
    # its junk never came from the model: nothing reaches the compiler, and the run is invalid
    assert result["valid"] is False and result["raw"] is None
    assert set(_outcomes(result).values()) == {"not_from_model"}
    assert results["reference_after_patch"]["raw"] == results["reference"]["raw"]


def test_problem_records_hold_no_solutions_or_hidden_tests(results):
    result = results["leak_solutions"]
    assert result["raw"] == 0.0
    assert "HELDOUT" not in json.dumps(result)  # the exception the module raised is never quoted
    assert {problem["outcome"] for problem in result["details"]["problems"]} == {"generation_error"}
    reports = (Path(result["root"]) / "reports.jsonl").read_text().splitlines()
    assert len(reports) == len(TEST_NAMES)
    for line in reports:
        report = json.loads(line)
        assert report["leaked_fields"] == []
        assert set(report["keys"]) <= {"name", "title", "description", "public_tests", "time_limit_s",
                                       "memory_limit_bytes", "difficulty", "cf_rating", "cf_tags", "source"}


def test_non_string_results_fail(results):
    result = results["non_strings"]
    outcomes = _outcomes(result)
    for name, outcome in outcomes.items():
        if sum(map(ord, name)) % 4 == 0:  # the real strings: hand-written, so never compiled
            assert outcome == "not_from_model", (name, outcome)
        else:  # objects, bytes and dicts are generation errors
            assert outcome == "generation_error", (name, outcome)
    assert result["valid"] is False and result["raw"] is None


@pytest.mark.parametrize("name", ["handwritten", "echo_handwritten"])
def test_programs_that_did_not_come_from_the_model_never_count(results, name):
    result = results[name]
    assert result["valid"] is False and result["raw"] is None
    assert set(_outcomes(result).values()) == {"not_from_model"}
    assert result["details"]["programs_from_model"] == 0
    assert all(p["from_model"] is False and p["compile_s"] == 0 for p in result["details"]["problems"])


def test_calls_without_the_key_are_refused(results):
    result = results["no_key"]
    assert result["server"]["unauthorised"] == 8 and result["server"]["calls"] == 0
    assert result["raw"] == 0.0
    assert {p["outcome"] for p in result["details"]["problems"]} == {"generation_error"}


def test_what_the_module_and_its_programs_write_privately_is_removed(results):
    result = results["leak_everything"]
    assert result["valid"] and result["raw"] == 0.0  # the echoed program compiles and runs, and answers nothing
    assert {p["outcome"] for p in result["details"]["problems"]} == {"wrong_answer"}
    shared = Path(result["root"]) / "shared"
    # the module and the programs did write (on the host nothing stops a write to a shared folder; the Docker
    # tier checks that the runner user's files are removed there) ...
    assert any(f.name.startswith("statement-") for f in shared.iterdir())
    assert any(f.name.startswith("input-") for f in shared.iterdir())
    # ... but their private temporary folder (TMPDIR) is gone with the scoring run's work folder
    private = Path((shared / "tmpdir.txt").read_text())
    assert private != Path("/tmp") and private.parent.name == "module"
    assert not private.exists() and not private.parent.parent.exists()  # the library's work folder is gone too


def test_hanging_module_is_cut_off(results):
    result = results["hanging"]
    assert result["valid"] and result["raw"] == 0.0
    assert result["elapsed"] < 60
    assert result["details"]["runner_timed_out"] is True


def test_processes_spawned_by_the_module_do_not_survive(results):
    result = results["spawn_daemon"]
    marker = Path(result["root"]) / "marker" / "daemon.pid"
    assert marker.exists(), "the hack did not run"
    pid = int(marker.read_text())
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    assert result["details"]["leftover_processes_killed"] is True
    assert result["raw"] is None  # `fn main() {}` is hand-written: invalid; the daemon never got to judging


def _user_can_run_toolchain(user: str) -> bool:
    try:
        pwd.getpwnam(user)
    except KeyError:
        return False
    rustc = shutil.which("rustc")
    probe = f"{sys.executable} -c 'import openai' && {rustc} --version"
    result = subprocess.run(["su", "-s", "/bin/sh", user, "-c", probe], capture_output=True)
    return result.returncode == 0


@pytest.mark.skipif(os.geteuid() != 0 or not _user_can_run_toolchain("nobody"),
                    reason="needs root and an unprivileged user that can run this Python and rustc")
def test_run_as_user_cannot_read_held_out_data(tmp_path, fake_openai, file_every_user_can_write):
    workspace, protected = make_env(tmp_path, HACKS / "leak_solutions.py")
    (workspace / "leak_file.txt").write_text(str(file_every_user_can_write))
    score_workspace(workspace, protected, fake_openai.env, run_as="nobody")
    reports = [json.loads(line) for line in file_every_user_can_write.read_text().splitlines()]
    assert reports and all(report["read"] == 0 and report["errors"] for report in reports)


def test_workspace_evaluator_is_a_copy_of_the_scorers():
    from rebench.rust_codecontests.task import ENVIRONMENT
    from rebench_inspect.runtime.staging import workspace_files

    files = workspace_files(ENVIRONMENT.at("full"))
    for name in ("rust_evaluator.py", "generate_runner.py"):
        assert files[f"rust_eval/{name}"].read_bytes() == (TASK / "sandbox" / name).read_bytes()
