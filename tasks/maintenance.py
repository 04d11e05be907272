"""Maintenance: the reference solver and the sandbox check, for every environment."""

from inspect_ai import Task, task
from inspect_ai.solver import Generate, Solver, TaskState, solver

from rebench_inspect import (
    TaskParameterError,
    in_rebench_namespace,
    install_reference_solution,
    not_one_of,
    sandbox_check_task,
)

from .environments import TASKS, environment_named


@solver
@in_rebench_namespace
def reference_solution(reuse_earlier_run: bool = False) -> Solver:
    """Install the environment's reference solution in the workspace instead of running an agent.

    Use with `--solver rebench/reference_solution` (and `--model none`) on any rebench task.

    Args:
        reuse_earlier_run: Where the reference's `solve.sh` ran before from the same inputs (environment code,
            scale, kind of sandbox, prepared assets), write what it left instead of running it again.
    """

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        environment = environment_named(state.metadata["environment"])
        await install_reference_solution(environment.at(state.metadata["scale"]), reuse_earlier_run)
        return state

    return solve


@task
@in_rebench_namespace
def sandbox_check(
    environment: str = "optimize_kernel",
    scale: str = "full",
    sandbox: str = "docker",
    anchors: str | None = None,
    reuse_reference_run: bool = False,
) -> Task:
    """Certify an image: the starting solution must score ≈ 0 and the reference ≈ 1 (maintenance task).

    One sample: its setup scores the starting solution, then the reference is installed and scored.

    Args:
        environment: Registered name of the environment to check.
        scale: `full` (the real image and hardware) or `smoke`.
        sandbox: `docker`, `k8s` or `local`.
        anchors: An anchors file (`rebench calibrate`) in place of the built-in anchors, as the environment's task
            takes it (a timed environment at smoke scale then measures none at setup).
        reuse_reference_run: Where the reference's `solve.sh` ran before from the same inputs, write what it left
            instead of running it again (`rebench demo` does, unless `--fresh`); a certification of an
            image leaves it off, so that the image trains the reference itself.
    """
    if environment not in TASKS:
        raise TaskParameterError(f"rebench/sandbox_check: {not_one_of('environment', environment, sorted(TASKS))}")
    environment_task = TASKS[environment](scale=scale, sandbox=sandbox, anchors=anchors)
    return sandbox_check_task(environment_named(environment), environment_task, reference_solution(reuse_reference_run))
