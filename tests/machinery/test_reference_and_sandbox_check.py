"""The reference solver and the sandbox check, on the toy environment (start 10 s → 0, reference 5 s → 1)."""

import shutil

import pytest
from inspect_ai import eval
from inspect_ai.log import resolve_sample_attachments
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox

from rebench_inspect.runtime.reference import install_reference_solution, sandbox_check_task
from rebench_inspect.runtime.state import current_layout
from rebench_inspect.runtime.task import build_task
from rebench_inspect.spec.environment import Anchors


def toy_solver(environment):
    @solver
    def install():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            await install_reference_solution(environment.at("smoke"))
            return state

        return solve

    return install()


def with_smoke_anchors(environment, start: float, reference: float):
    anchors = Anchors(start=start, reference=reference, provenance="off on purpose")
    return environment.model_copy(update={"anchors": {"smoke": anchors, "full": environment.anchors["full"]}})


def sandbox_check(environment):
    """The toy's sandbox check, run: its one sample and that sample's `anchors_reproduced` score."""
    environment_task = build_task(environment.at("smoke"), sandbox="local")
    task = sandbox_check_task(environment, environment_task, toy_solver(environment))
    [log] = eval(task, model="none", display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    return sample, sample.scores["anchors_reproduced"]


def test_reference_solver_reaches_normalised_one_without_a_model(toy_environment):
    task = build_task(toy_environment.at("smoke"), sandbox="local")
    [log] = eval(task, solver=toy_solver(toy_environment), model="none", display="none", log_dir=None)
    assert log.status == "success", log.error
    assert log.samples[0].scores["rebench_scorer"].value["normalised"] == 1.0


def test_sandbox_check_certifies_start_zero_and_reference_one_in_one_sample(toy_environment):
    sample, check = sandbox_check(toy_environment)
    assert (sample.id, sample.metadata) == ("toy", {"environment": "toy", "scale": "smoke"})
    # the setup scored the untouched start (the first entry), the final pass the installed reference (the last)
    assert [entry["label"] for entry in sample.scores["rebench_scorer"].metadata["score_log"]] == ["start", "final"]
    assert check.value == "C" and check.explanation.startswith("both passed: starting normalised 0.000, expected 0")
    assert check.metadata["starting"] == {
        "expected": 0.0,
        "passed": True,
        "label": "start",
        "valid": True,
        "raw": 10.0,
        "normalised_unclipped": pytest.approx(0.0),
        "message": check.metadata["starting"]["message"],
    }
    assert check.metadata["reference"]["label"] == "final" and check.metadata["reference"]["raw"] == 5.0
    assert check.metadata["reference"]["passed"] is True


@pytest.mark.parametrize(
    "start, reference, failing, landed",
    [
        # reference anchor 2 s: the reference (5 s) lands at ln(10/5)/ln(10/2) = 0.431
        (10.0, 2.0, "reference", "reference normalised 0.431, expected 1 ± 0.25"),
        # start anchor 20 s, reference 10 s: the start (10 s) lands at 1, the reference (5 s) at 2: both off
        (20.0, 10.0, "starting and reference", "starting normalised 1.000, expected 0 ± 0.25"),
        # start anchor 14 s: the start (10 s) lands at ln(14/10)/ln(14/5) = 0.327, the reference at 1
        (14.0, 5.0, "starting", "starting normalised 0.327, expected 0 ± 0.25"),
    ],
)
def test_sandbox_check_fails_naming_the_solution_that_misses_its_anchor(toy_environment, start, reference, failing,
                                                                        landed):  # fmt: skip
    _, check = sandbox_check(with_smoke_anchors(toy_environment, start, reference))
    assert check.value == "I"
    assert check.explanation.startswith(f"{failing} failed: ") and landed in check.explanation
    passed = {solution: result["passed"] for solution, result in check.metadata.items()}
    assert passed == {solution: solution not in failing for solution in ("starting", "reference")}


def test_sandbox_check_calls_a_score_log_that_does_not_begin_with_the_start_a_harness_error(toy_environment):
    from rebench_inspect.cli.demo import demo_rows
    from rebench_inspect.runtime.state import rebench_state

    @solver
    def forget_the_start():
        async def solve(state: TaskState, generate: Generate) -> TaskState:
            rebench_state().score_log = []  # as if the setup had not scored the starting solution
            return state

        return solve

    task = sandbox_check_task(
        toy_environment, build_task(toy_environment.at("smoke"), sandbox="local"), forget_the_start()
    )
    [log] = eval(task, model="none", display="none", log_dir=None)
    check = log.samples[0].scores["anchors_reproduced"]
    assert check.value == "I" and not check.metadata
    assert check.explanation.startswith("harness error: the score log's entries are ['final'], not the setup's 'start'")
    # `rebench demo` shows it as one FAIL row with that explanation
    [row] = demo_rows(toy_environment, log)
    assert (row.solution, row.status, row.verdict) == ("-", "error", "FAIL") and row.reason == check.explanation


# A reference whose solve.sh says each time it runs, writes the answer, makes a file and removes another (gone.txt,
# one of the reference's files).
SOLVE_AND_COUNT = """echo ran >> {runs}
echo 5 > answer.txt
echo made > made.txt
rm gone.txt
"""


@pytest.fixture
def counting_reference(toy_environment, tmp_path, monkeypatch):
    """The toy with a solve.sh that counts its runs in the returned file; the cache in `tmp_path`."""
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    folder = shutil.copytree(toy_environment.folder, tmp_path / "toy_solving")
    runs = tmp_path / "runs.txt"
    (folder / "reference" / "answer.txt").unlink()
    (folder / "reference" / "gone.txt").write_text("to be removed by solve.sh\n")
    (folder / "reference" / "solve.sh").write_text(SOLVE_AND_COUNT.format(runs=runs))
    return toy_environment.model_copy(update={"location": folder}), runs


@solver
def reference_then_listed(environment, reuse_earlier_run: bool):
    """Installs the reference, then keeps the workspace's file names in the sample's metadata."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await install_reference_solution(environment.at("smoke"), reuse_earlier_run)
        listed = await sandbox().exec(["ls", current_layout().workspace])
        state.metadata["workspace"] = sorted(listed.stdout.split())
        return state

    return solve


def checked_with_reference(environment, reuse_earlier_run: bool):
    task = sandbox_check_task(
        environment,
        build_task(environment.at("smoke"), sandbox="local"),
        reference_then_listed(environment, reuse_earlier_run),
    )
    [log] = eval(task, model="none", display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    sample = resolve_sample_attachments(sample)  # long info lines are kept as attachments
    infos = [event.data for event in sample.events if event.event == "info"]
    return sample, " ".join(str(info) for info in infos)


def test_a_reference_run_from_the_same_inputs_is_reused_only_when_asked(counting_reference):
    environment, runs = counting_reference
    sample, said = checked_with_reference(environment, reuse_earlier_run=True)
    assert runs.read_text().splitlines() == ["ran"] and "Running the reference solution's solve.sh" in said
    assert sample.scores["anchors_reproduced"].value == "C"
    assert sample.metadata["workspace"] == ["answer.txt", "made.txt", "solve.sh"]
    # the same inputs: what the first run left is written over the workspace (made.txt made, gone.txt removed)
    sample, said = checked_with_reference(environment, reuse_earlier_run=True)
    assert runs.read_text().splitlines() == ["ran"] and "ran before from these same inputs" in said
    assert sample.scores["anchors_reproduced"].value == "C"
    assert sample.scores["anchors_reproduced"].metadata["reference"]["raw"] == 5.0
    assert sample.metadata["workspace"] == ["answer.txt", "made.txt", "solve.sh"]
    # not asked: it runs
    checked_with_reference(environment, reuse_earlier_run=False)
    assert runs.read_text().splitlines() == ["ran"] * 2
    # another reference (any file of the environment's folder): another run
    (environment.folder / "reference" / "solve.sh").write_text(
        SOLVE_AND_COUNT.format(runs=runs).replace("made", "made again")
    )
    sample, said = checked_with_reference(environment, reuse_earlier_run=True)
    assert runs.read_text().splitlines() == ["ran"] * 3 and "ran before" not in said
