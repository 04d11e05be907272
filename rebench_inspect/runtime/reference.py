"""The reference solver and the sandbox check (certify an image: start ≈ 0, reference ≈ 1)."""

import time
from collections.abc import Mapping
from pathlib import Path

from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.log import transcript
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import Solver, TaskState
from inspect_ai.util import sandbox

from ..spec.environment import EnvironmentSpec, ResolvedEnvironment
from ..spec.normalise import ScoreEntry
from .scoring import ScoringInfrastructureError, score_log, write_tree
from .staging import reference_files
from .state import current_layout

REFERENCE_SCRIPT = "solve.sh"
# How far from 0 (start) and 1 (reference) a certified image may land: timings and judged scores are noisy.
SANDBOX_CHECK_TOLERANCE = 0.25


async def write_over_workspace(files: Mapping[str, Path]) -> None:
    """Write host files at their relative paths over the sample's workspace, owned by the agent user as the rest of
    the workspace is."""
    layout = current_layout()
    await write_tree(files, layout.workspace)
    if layout.agent_user:
        await sandbox().exec(["chown", "-R", f"{layout.agent_user}:{layout.agent_user}", layout.workspace])


async def install_reference_solution(environment: ResolvedEnvironment) -> None:
    """Copy the reference files over the workspace, then run `solve.sh` there as the agent user if present."""
    layout = current_layout()
    files = reference_files(environment.spec)
    await write_over_workspace(files)
    if REFERENCE_SCRIPT in files:
        # It may train a model (minutes at smoke scale on a CPU): the transcript says what is running.
        transcript().info(f"Running the reference solution's {REFERENCE_SCRIPT} in the workspace…")
        started = time.monotonic()
        result = await sandbox().exec(
            ["bash", REFERENCE_SCRIPT],
            cwd=layout.workspace,
            user=layout.agent_user,
            env={"REBENCH_SCALE": environment.scale, "PYTHON": layout.python},
        )
        if not result.success:
            raise ScoringInfrastructureError(
                f"reference solution failed (exit {result.returncode}): {result.stderr[-3000:]} {result.stdout[-3000:]}"
            )
        transcript().info(f"Reference solution ready after {time.monotonic() - started:.0f} s.")


def solution_check(entry: ScoreEntry, expected: float) -> dict:
    """One solution's verdict from its score-log entry (the unclipped value, so a solution slower than the start
    shows how far off it is), with what a reader of the verdict needs to show it."""
    value = entry.normalised_unclipped
    passed = entry.valid and value is not None and abs(value - expected) <= SANDBOX_CHECK_TOLERANCE
    return {
        "expected": expected,
        "passed": passed,
        "label": entry.label,
        "valid": entry.valid,
        "raw": entry.raw,
        "normalised_unclipped": value,
        "message": entry.message,
    }


def normalised_text(value: float) -> str:
    return f"{round(value, 3) + 0.0:.3f}"  # + 0.0: no "-0.000"


def landed(check: dict) -> str:
    """Where a solution's check landed against what it expected, e.g. "normalised 0.327, expected 0 ± 0.25"."""
    value = check["normalised_unclipped"]
    found = f"invalid ({check['message'] or 'no message'})" if value is None else f"normalised {normalised_text(value)}"
    return f"{found}, expected {check['expected']:g} ± {SANDBOX_CHECK_TOLERANCE}"


@scorer(metrics=[accuracy()])
def anchors_reproduced() -> Scorer:
    """CORRECT when the starting solution lands near 0 and the reference near 1.

    Runs after `rebench_scorer`: the score log's first entry ("start") scored the untouched starting solution at
    setup, and the final pass appended its last entry, which scores the reference the solver installed. The
    metadata holds each solution's check (`starting`, `reference`: its entry's values, expected, passed).
    """

    async def score(state: TaskState, target: Target) -> Score:
        entries = score_log()
        labels = [entry.label for entry in entries]
        if len(labels) < 2 or labels[0] != "start" or labels[-1] != "final":
            # The setup scores the start and the final pass the reference: anything else is the harness's fault.
            return Score(
                value=INCORRECT,
                answer="no verdict",
                explanation=f"harness error: the score log's entries are {labels}, not the setup's 'start' first "
                "and the final pass's 'final' last, so the starting and the reference solution cannot be judged",
            )
        checks = {"starting": solution_check(entries[0], 0.0), "reference": solution_check(entries[-1], 1.0)}
        failed = [solution for solution, check in checks.items() if not check["passed"]]
        said = "; ".join(f"{solution} {landed(check)}" for solution, check in checks.items())
        return Score(
            value=INCORRECT if failed else CORRECT,
            answer=", ".join(f"{solution} {'FAIL' if solution in failed else 'PASS'}" for solution in checks),
            explanation=f"{' and '.join(failed)} failed: {said}" if failed else f"both passed: {said}",
            metadata=checks,
        )

    return score


def sandbox_check_task(environment: EnvironmentSpec, environment_task: Task, install: Solver) -> Task:
    """Run the environment's own task without an agent: its setup scores the starting solution (the score log's
    first entry), `install` installs the reference, and the final scoring pass scores it (the last entry).

    One sample per environment, with no target: `anchors_reproduced` judges both solutions.
    """
    scale = environment_task.metadata["scale"]  # type: ignore[index]
    return Task(
        # Titled by environment (the viewer lists logs by task name; `rebench demo` writes one log per environment).
        name=f"rebench/sandbox_check/{environment.name}",
        dataset=[
            Sample(
                id=environment.name,
                input="sandbox check: the starting solution (scored at setup), then the reference solution",
                metadata={"environment": environment.name, "scale": scale},
            )
        ],
        setup=environment_task.setup,
        solver=install,
        scorer=[*environment_task.scorer, anchors_reproduced()],  # type: ignore[misc]
        sandbox=environment_task.sandbox,
        model_roles=environment_task.model_roles,
        metadata={"environment": environment.name, "scale": scale, "kind": "maintenance"},
    )
