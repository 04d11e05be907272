"""The reference solver and the sandbox check (certify an image: start ≈ 0, reference ≈ 1)."""

import time

from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.log import transcript
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import Solver, TaskState
from inspect_ai.util import sandbox

from ..spec.environment import EnvironmentSpec, ResolvedEnvironment
from .scoring import ScoringInfrastructureError, score_log
from .staging import reference_files
from .state import current_layout

REFERENCE_SCRIPT = "solve.sh"
# How far from 0 (start) and 1 (reference) a certified image may land: timings and judged scores are noisy.
SANDBOX_CHECK_TOLERANCE = 0.25


async def install_reference_solution(environment: ResolvedEnvironment) -> None:
    """Copy the reference files over the workspace, then run `solve.sh` there as the agent user if present."""
    layout = current_layout()
    files = reference_files(environment.spec)
    for relative, source in files.items():
        await sandbox().write_file(f"{layout.workspace}/{relative}", source.read_bytes())
    if layout.agent_user:
        await sandbox().exec(["chown", "-R", f"{layout.agent_user}:{layout.agent_user}", layout.workspace])
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


@scorer(metrics=[accuracy()])
def anchors_reproduced() -> Scorer:
    """CORRECT when the final scoring run lands near the anchor the installed solution should reproduce.

    Runs after `rebench_scorer`, whose final pass appended the last entry of the score log.
    """

    async def score(state: TaskState, target: Target) -> Score:
        final = score_log()[-1]
        expected = float(target.text)
        # Unclipped, so a solution slower than the start shows how far off it is.
        value = final.normalised_unclipped
        close = final.valid and value is not None and abs(value - expected) <= SANDBOX_CHECK_TOLERANCE
        return Score(
            value=CORRECT if close else INCORRECT,
            answer="invalid" if value is None else f"{value:.3f}",
            explanation=f"expected {expected} ± {SANDBOX_CHECK_TOLERANCE}; final entry: {final.model_dump_json()}",
        )

    return score


def sandbox_check_samples(environment: EnvironmentSpec, scale: str) -> list[Sample]:
    return [
        Sample(
            id=f"{environment.name}-{solution}",
            input=f"sandbox check: {solution} solution",
            target=expected,
            metadata={"environment": environment.name, "scale": scale, "solution": solution},
        )
        for solution, expected in (("starting", "0"), ("reference", "1"))
    ]


def sandbox_check_task(environment: EnvironmentSpec, environment_task: Task, install: Solver) -> Task:
    """Run the environment's own task without an agent, once on the starting and once on the reference solution."""
    scale = environment_task.metadata["scale"]  # type: ignore[index]
    return Task(
        # Titled by environment (the viewer lists logs by task name; `rebench demo` writes one log per environment).
        name=f"rebench/sandbox_check/{environment.name}",
        dataset=sandbox_check_samples(environment, scale),
        setup=environment_task.setup,
        solver=install,
        scorer=[*environment_task.scorer, anchors_reproduced()],  # type: ignore[misc]
        sandbox=environment_task.sandbox,
        model_roles=environment_task.model_roles,
        metadata={"environment": environment.name, "scale": scale, "kind": "maintenance"},
    )
