"""Score a host directory as one scoring run of an eval would, outside any eval (`rebench score`)."""

import tempfile
import time
from pathlib import Path

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.solver import Generate, Solver, TaskState, solver

from ..spec.environment import ResolvedEnvironment
from ..spec.normalise import ScoreEntry
from .layout import detect_layout
from .measured_anchors import measure_anchors as measure_anchors_here
from .measured_anchors import measures_anchors
from .scoring import SCORER_NAME, checked_exec
from .state import rebench_state
from .task import build_task, lay_out_workspace


@solver
def install_workspace(
    environment: ResolvedEnvironment,
    workspace: Path | None,
    measure_anchors: bool,
) -> Solver:
    """Lay out the sample as the environment's setup does (data prepared, protected folder, anchors measured where
    `measure_anchors`), then put the given workspace in place of the starting one (None: score the starting
    workspace)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        layout = await detect_layout(agent_user=None)
        state_store = rebench_state()
        state_store.layout = layout
        await lay_out_workspace(environment, layout)
        if measure_anchors:
            state_store.anchors = await measure_anchors_here(environment, layout)
        if workspace is not None:
            await checked_exec(["sh", "-c", f'rm -rf "{layout.workspace}" && cp -a "{workspace}" "{layout.workspace}"'])
        state_store.started_at = time.time()
        return state

    return solve


def _final_metadata(log: EvalLog) -> dict:
    """The final score's metadata: its score log and the anchors it was normalised with."""
    sample = log.samples[0] if log.samples else None
    if log.status != "success" or sample is None or sample.error is not None:
        error = sample.error.message if sample is not None and sample.error else (log.error and log.error.message)
        raise RuntimeError(f"the scoring program failed: {error}")
    final = sample.scores[SCORER_NAME] if sample.scores else None
    if final is None or not final.metadata:
        raise RuntimeError("the eval recorded no score")
    return final.metadata


def score_workspace(
    environment: ResolvedEnvironment,
    workspace: Path | None,
    environment_task: Task | None = None,
    model_roles: dict[str, str] | None = None,
    measure_anchors: bool = True,
    log_dir: str | None = None,
) -> dict:
    """Score a host directory as one scoring run of an eval would (local sandbox): the environment's own scorer,
    with the services it opens around scoring (model proxies at their scale's models; `model_roles` overrides).
    `workspace=None` scores the environment's starting workspace as its setup lays it out. A timed environment at
    smoke scale measures its anchors first (`measured_anchors`) unless not `measure_anchors` (the fixed ones).
    `log_dir` keeps the eval log of the scoring (its transcript times each step); default: none kept."""
    if workspace is not None and not workspace.is_dir():
        raise ValueError(f"{workspace} is not a directory")
    environment_task = environment_task or build_task(environment, sandbox="local", agent_user=None)
    scale = environment.scale
    task = Task(
        dataset=[Sample(id=environment.name, input=f"rebench score {environment.name}")],
        solver=install_workspace(
            environment,
            workspace.resolve() if workspace else None,
            measure_anchors and measures_anchors(environment),
        ),
        scorer=environment_task.scorer,
        cleanup=environment_task.cleanup,  # closes what the scoring opened for the sample (a model proxy's door)
        sandbox="local",
        model_roles={**(environment_task.model_roles or {}), **(model_roles or {})},
        metadata={"environment": environment.name, "scale": scale, "kind": "cli-score"},
    )
    with tempfile.TemporaryDirectory(prefix="rebench-score-") as temporary_log_dir:
        # No control server (Inspect's endpoint for watching a running eval): one scoring run has nobody to watch
        # it, and starting one costs a command-line call about half a second.
        [log] = inspect_eval(task, model="none", display="none", log_dir=log_dir or temporary_log_dir, ctl_server=False)
        final = _final_metadata(log)
    entry = ScoreEntry.model_validate(final["score_log"][-1])
    return {
        "environment": environment.name,
        "scale": scale,
        "valid": entry.valid,
        "raw": entry.raw,
        "transformed": entry.transformed,
        "normalised": entry.normalised,
        "message": entry.message,
        "details": entry.details,
        "anchors": final["anchors"],
    }
