"""Turn an environment resolved at a scale (`ResolvedEnvironment`) into an Inspect `Task`: one builder for all."""

import time
from collections.abc import Awaitable, Callable, Sequence

from inspect_ai import Epochs, Task
from inspect_ai.dataset import Sample
from inspect_ai.log import HeadlineMetric, transcript
from inspect_ai.scorer import score as run_task_scorers
from inspect_ai.solver import Generate, Solver, TaskState, solver

from ..spec.environment import EnvironmentSpec, ResolvedEnvironment
from ..spec.register import task_version
from .agent import rebench_agent
from .checkpoints import checkpoint_config, on_resume, resuming
from .environment_task import DEFAULT_TIME_BUDGET_HOURS, CommonParameters, checked_parameters
from .held import HeldContext
from .layout import SandboxLayout, detect_layout
from .measured_anchors import measure_anchors as measure_anchors_here
from .measured_anchors import measures_anchors
from .sandbox import LOCK_DIR, SCORING_SERVICE, TEMP_DIRS, sandbox_spec, warn_about_docker
from .scoring import (
    SCORER_NAME,
    SandboxService,
    checked_exec,
    keep_start_workspace_again,
    open_services,
    rebench_scorer,
    stage_in_sandbox,
    write_tree,
)
from .staging import prepare_command, workspace_files
from .state import rebench_state

# Wall-clock safety net on top of the working-time budget (model retries, scoring runs, slow sandboxes).
TIME_LIMIT_FACTOR = 1.5


def budget_sentence(hours: float) -> str:
    minutes = round(hours * 60)
    amount = f"{hours:g} hours" if minutes >= 120 else f"{minutes} minutes"
    return (
        f"You have {amount} of working time (time spent waiting on the model provider does not count). "
        "When it runs out, the run stops and your workspace is scored as it is."
    )


def score_note(environment: EnvironmentSpec, visible: bool) -> str:
    rule = (
        "Your best valid score counts."
        if environment.final_rule.value == "best"
        else "Only your last valid answer counts."
    )
    if visible:
        return f"The `score` tool reports each result, and `score_log` lists them all. {rule}"
    return (
        "In this variant the `score` tool only tells you whether your submission is valid, never its score; "
        f"`score_log` lists the validity of every run. {rule}"
    )


def render_instructions(
    environment: ResolvedEnvironment,
    workspace: str,
    hours: float,
    visible: bool,
    run_fields: dict[str, str] | None = None,
) -> str:
    """instructions.md with the workspace, budget, score note, the scale's fields and this run's fields."""
    return environment.spec.instructions_template.format(
        workspace=workspace,
        budget=budget_sentence(hours),
        score_note=score_note(environment.spec, visible),
        **{**environment.instruction_fields, **(run_fields or {})},
    )


# By sample uuid, from setup to cleanup: the agent's services, held open by a task of their own (`HeldContext`), so
# that any `--solver` (a human, a custom agent) gets them.
_agent_services: dict[str, HeldContext[dict[str, str]]] = {}


@solver
def rebench_setup(
    environment: ResolvedEnvironment,
    agent_user: str | None,
    time_budget_hours: float,
    score_visible: bool,
    services: Sequence[SandboxService] = (),
    run_fields: dict[str, str] | None = None,
    measure_anchors: bool = False,
) -> Solver:
    """Lay out the workspace, prepare models and data, measure the anchors where `measure_anchors`
    (`measured_anchors`), and score the starting solution (the log's first entry). Resuming from a checkpoint, the
    same but for the measuring and scoring: the start's kept copy is made again, and the workspace left empty for the
    checkpoint's."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        layout = await detect_layout(agent_user, SCORING_SERVICE if environment.spec.isolated_scoring else None)
        state_store = rebench_state()
        state_store.layout = layout
        state_store.score_visible = score_visible
        await lay_out_workspace(environment, layout)
        resumed = resuming() != "initial"
        if resumed:
            # Everything of the root's as at the start (the store, anchors included, comes back with the checkpoint),
            # then the agent's home from the checkpoint, as it was: no starting file it had deleted comes back.
            await keep_start_workspace_again(environment.spec, layout)
            empty = 'rm -rf "$0" && mkdir "$0" && chown "$1:$1" "$0"'
            await checked_exec(["sh", "-c", empty, layout.workspace, layout.agent_user or "root"])
        elif measure_anchors:
            state_store.anchors = await measure_anchors_here(environment, layout, services)
        if services:
            held = HeldContext(open_services(services, layout, "agent"), name="rebench-agent-services")
            await held.start()
            _agent_services[state.uuid] = held
        # Instructions name the workspace, which is only known now for the local sandbox.
        state.user_prompt.text = render_instructions(
            environment, layout.workspace, time_budget_hours, score_visible, run_fields
        )
        if resumed:
            transcript().info("Resuming from a checkpoint: the start is not scored again.")
            return state
        state_store.started_at = time.time()
        transcript().info("Scoring the starting solution (the score log's first entry)…")
        await run_task_scorers(state)
        state_store.checkpointed_entries = len(state_store.score_log)  # the start alone is no state worth keeping
        return state

    return solve


def close_sample_services(services: Sequence[SandboxService]) -> Callable[[TaskState], Awaitable[None]]:
    """The task's cleanup: the agent's services, then what a service kept open across the sample's scoring runs
    (`close_for_sample`, e.g. a model proxy's scoring door)."""

    async def cleanup(state: TaskState) -> None:
        held = _agent_services.pop(state.uuid, None)
        if held is not None:
            await held.stop()
        layout = rebench_state().layout
        if layout is None:
            return
        for service in services:
            close_for_sample = getattr(service, "close_for_sample", None)
            if close_for_sample is not None:
                await close_for_sample(layout)

    return cleanup


async def lay_out_workspace(environment: ResolvedEnvironment, layout: SandboxLayout) -> None:
    """The sample's folders, the starting workspace and (where the environment has a preparation) its models and
    data, as the setup step lays them out."""
    spec, scale = environment.spec, environment.scale
    await checked_exec(["mkdir", "-p", layout.workspace])
    # The scoring service is closed the same way: the agent's code runs there at scoring time.
    scoring_boxes = [] if layout.scoring_service is None else [layout.scoring_layout.sandbox()]
    for box in [layout.sandbox(), *scoring_boxes]:
        await checked_exec(["sh", "-c", 'mkdir -p "$1" && chmod 700 "$1"', "protected", layout.protected], box=box)
        if layout.is_container:
            # k8s mounts the capped temporary folders 0777: sticky, so no user can rename or delete another's files.
            await checked_exec(["sh", "-c", 'mkdir -p "$@" && chmod 1777 "$@"', "temp-dirs", *TEMP_DIRS], box=box)
            await checked_exec(["sh", "-c", 'if [ -d "$1" ]; then chmod 755 "$1"; fi', "lock-dir", LOCK_DIR], box=box)
    await write_tree(workspace_files(environment), layout.workspace)
    if spec.prepare_script is not None:
        # Long at smoke scale on a cold cache (it trains tiny models): say so in the transcript the viewer shows.
        transcript().info(f"Preparing {spec.name} at {scale} scale (models and data; cached after a first run)…")
        started = time.monotonic()
        await _prepare(environment, layout)
        if layout.scoring_service is not None:
            # The scoring service prepares its own held-out data from the same image (its /protected, root-only like
            # the agent's container's), so nothing of it passes through the agent's container.
            await _prepare(environment, layout.scoring_layout)
        transcript().info(f"Prepared {spec.name} in {time.monotonic() - started:.0f} s.")
    if layout.agent_user:
        await checked_exec(["chown", "-R", f"{layout.agent_user}:{layout.agent_user}", layout.workspace])


async def _prepare(environment: ResolvedEnvironment, layout: SandboxLayout) -> None:
    box = layout.sandbox()
    await stage_in_sandbox(environment.spec, layout.code_dir, box)
    command, cwd = prepare_command(environment, **layout.program_paths, setup=True)
    await checked_exec(command, timeout=environment.setup_timeout_s, cwd=cwd, box=box)


def build_task(
    environment: ResolvedEnvironment,
    parameters: CommonParameters | None = None,
    *,
    time_budget_hours: float = DEFAULT_TIME_BUDGET_HOURS,
    token_limit: int | None = None,
    message_limit: int | None = None,
    sandbox: str = "docker",
    agent_user: str | None = "agent",
    score_visible: bool | None = None,
    epochs: int = 1,
    services: Sequence[SandboxService] = (),
    model_roles: dict | None = None,
    instruction_fields: dict[str, str] | None = None,
) -> Task:
    """The Inspect task for one environment at the scale it was resolved at (`resolve` in the task function, or
    `EnvironmentSpec.at`). The other common parameters come as `parameters` (from `@environment_task`, documented
    there) or one by one.

    `instruction_fields` are this run's extra `str.format` fields of instructions.md (e.g. a budget parameter),
    merged over the environment's per-scale fields.
    """
    spec = environment.spec
    if parameters is None:
        parameters = CommonParameters(
            scale=environment.scale,
            time_budget_hours=time_budget_hours,
            token_limit=token_limit,
            message_limit=message_limit,
            sandbox=sandbox,
            agent_user=agent_user,
            score_visible=score_visible,
            epochs=epochs,
            anchors=environment.anchors_file,
        )
    elif (parameters.scale, parameters.anchors or None) != (environment.scale, environment.anchors_file):
        raise ValueError(f"rebench/{spec.name}: the parameters' scale and anchors are not the ones it was resolved at")
    parameters = checked_parameters(spec, parameters)
    scale, hours = environment.scale, parameters.time_budget_hours
    visible = spec.score_visible if parameters.score_visible is None else parameters.score_visible
    if parameters.sandbox == "docker":
        warn_about_docker(environment)
    working_limit = round(hours * 3600)
    version = task_version(spec.folder)  # tasks/<env>/eval.yaml: the register's N-X
    sample = Sample(
        id=spec.name,
        input=render_instructions(environment, "/home/agent/workspace", hours, visible, instruction_fields),
        metadata={
            "environment": spec.name,
            "metr_id": spec.metr_id,
            "paper_name": spec.paper_name,
            "scale": scale,
            "time_budget_hours": hours,
            "score_visible": visible,
        },
    )
    return Task(
        dataset=[sample],
        setup=rebench_setup(
            environment,
            parameters.agent_user or None,
            hours,
            visible,
            services,
            instruction_fields,
            measures_anchors(environment),
        ),
        cleanup=close_sample_services(services) if services else None,
        checkpoint=checkpoint_config(parameters.sandbox, parameters.checkpoint_minutes),
        on_resume=on_resume,
        solver=rebench_agent(),
        scorer=rebench_scorer(environment, services),
        sandbox=sandbox_spec(environment, parameters.sandbox),
        working_limit=working_limit,
        time_limit=round(working_limit * TIME_LIMIT_FACTOR),
        token_limit=parameters.token_limit,
        message_limit=parameters.message_limit,
        epochs=Epochs(parameters.epochs, ["mean", "max"]),
        model_roles=model_roles,
        headline_metric=HeadlineMetric(scorer=SCORER_NAME, score="normalised", metric="mean", reducer="mean"),
        metadata={"environment": spec.name, "scale": scale, **version.metadata()},
        version=version.comparability,
    )
