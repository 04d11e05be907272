"""Scoring: run an environment's scoring program in the sandbox, keep the score log, pick the final score.

Every scoring run (the starting workspace after setup, each use of the agent's `score` tool or of
`task score` under `human_cli`, and the final pass) goes through the one `rebench_scorer`. Inspect's
intermediate-scoring API (`inspect_ai.scorer.score`) calls it during the run, so each entry appears as an
"Intermediate Score" in the viewer; Inspect's final scoring pass calls it once more after the agent stops.
What a scoring run shows the participant, by any of these routes, is `participant_view`'s decision.
"""

import io
import json
import logging
import math
import tarfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Literal

from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import OutputLimitExceededError, SandboxEnvironment, sample_limits, sandbox
from pydantic import BaseModel, ValidationError, field_validator

from rebench.sandbox_lib.isolation import RUNNER_USER

from ..spec.environment import EnvironmentSpec, ResolvedEnvironment
from ..spec.normalise import ScoreEntry, anchor_values, final_entry, score_entry
from ..spec.timeouts import (
    HARNESS_COMMAND_TIMEOUT_S,
    SCORING_TIMEOUT_MARGIN_S,
    SUBMISSION_COPY_TIMEOUT_S,
    SUBMISSION_PACK_TIMEOUT_S,
)
from .layout import SandboxLayout
from .staging import sandbox_command, sandbox_lib_tree, scoring_command, staged_tree
from .state import current_layout, rebench_state

logger = logging.getLogger(__name__)

SCORER_NAME = "rebench_scorer"
# The sandbox_lib programs the host runs besides an environment's own (docs/CONTRACT.md).
USERS_MODULE = "rebench.sandbox_lib.users_cli"
SUBMISSION_MODULE = "rebench.sandbox_lib.submission"

# A service runs beside the agent ("agent") or beside one scoring run ("scoring"), e.g. the model-role proxy, and
# yields environment variables for the processes that use it.
ServicePurpose = Literal["agent", "scoring"]
SandboxService = Callable[[SandboxLayout, ServicePurpose], AbstractAsyncContextManager[dict[str, str]]]


# Defence in depth behind the sandbox side's own caps (tasks/sandbox_lib/result.py): whatever a scoring program
# writes, no more than this reaches the agent or the log.
MAX_RESULT_BYTES = 64 * 1024
MAX_MESSAGE_CHARS = 1000
MAX_DETAILS_BYTES = 16 * 1024


class ScoringProgramResult(BaseModel):
    """What a scoring program writes (docs/CONTRACT.md), cut to the caps."""

    valid: bool
    raw: float | None = None
    message: str = ""
    details: dict = {}

    @field_validator("message")
    @classmethod
    def _cap_message(cls, message: str) -> str:
        return message[:MAX_MESSAGE_CHARS]

    @field_validator("details")
    @classmethod
    def _cap_details(cls, details: dict) -> dict:
        if len(json.dumps(details).encode()) > MAX_DETAILS_BYTES:
            return {"details_left_out": "details over the size limit were left out"}
        return details


# The details key a scoring program sets when the submission's data set off a bug of the scorer (sandbox_lib's `main`,
# docs/CONTRACT.md): the entry is invalid, and `rebench report` counts the runs whose final scoring ended so.
SCORING_FAILURE = "scoring_failure"


class ScoringInfrastructureError(RuntimeError):
    """The scoring program itself failed: the sample errors (and can be retried); no log entry is made."""


@asynccontextmanager
async def open_services(
    services: Sequence[SandboxService], layout: SandboxLayout, purpose: ServicePurpose
) -> AsyncIterator[dict[str, str]]:
    async with AsyncExitStack() as stack:
        environment: dict[str, str] = {}
        for service in services:
            environment.update(await stack.enter_async_context(service(layout, purpose)))
        yield environment


async def stage_in_sandbox(
    environment: EnvironmentSpec, destination: str, box: SandboxEnvironment | None = None
) -> None:
    """Replace `destination` with a fresh copy of the staged tree, writable and readable by root only."""
    await stage_files(staged_tree(environment), destination, box or sandbox())


async def stage_files(files: Mapping[str, Path], destination: str, box: SandboxEnvironment) -> None:
    """Replace `destination` in `box` with a fresh copy of `files`, writable and readable by root only."""
    await write_tree(files, destination, box, replace_root_only=True)


async def write_tree(
    files: Mapping[str, Path],
    destination: str,
    box: SandboxEnvironment | None = None,
    replace_root_only: bool = False,
) -> None:
    """Write host files at their relative paths under `destination` (made if missing) as the harness's user: one
    archive unpacked by one command. A `write_file` per file costs two `docker exec`s (about 0.3 s) in a container,
    and a sample's setup and two scoring runs wrote about 250 files that way. With `replace_root_only`, the same
    command first removes `destination` and makes it again readable by root only (each `docker compose exec` costs
    about 0.2 s of CPU, and every scoring run stages its program)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for relative, source in sorted(files.items()):
            data = source.read_bytes()
            entry = tarfile.TarInfo(relative)
            entry.size, entry.mode = len(data), 0o644  # what write_file gave: no owner's bits of the host
            archive.addfile(entry, io.BytesIO(data))
    # -m: each file dated now, as a written file is (the archive carries no times).
    make = 'rm -rf "$1" && mkdir -p "$1" && chmod 700 "$1"' if replace_root_only else 'mkdir -p "$1"'
    unpack = f'{make} && tar -x -m --no-same-owner -C "$1" -f -'
    await checked_exec(["sh", "-c", unpack, "write-tree", destination], box=box, input=buffer.getvalue())


async def checked_exec(
    cmd: list[str],
    timeout: float = HARNESS_COMMAND_TIMEOUT_S,
    cwd: str | None = None,
    box: SandboxEnvironment | None = None,
    input: bytes | None = None,
    reads_agent_files: bool = False,
) -> str:
    """A harness command in the sandbox (as root; `box`: another of the sample's sandboxes than the default one);
    its failure is an infrastructure error. `reads_agent_files`: the command walks what the agent made, so its
    error output may quote the agent's names and is left out of the error (a sample's error quotes no agent text)."""
    result = await (box or sandbox()).exec(cmd, timeout=max(1, round(timeout)), cwd=cwd, input=input)
    if not result.success:
        said = "its output is not quoted: it may name the agent's files" if reads_agent_files else result.stderr[-3000:]
        raise ScoringInfrastructureError(f"sandbox command failed (exit {result.returncode}): {' '.join(cmd)}: {said}")
    return result.stdout


async def run_scoring_program(
    environment: ResolvedEnvironment,
    layout: SandboxLayout,
    services: Sequence[SandboxService] = (),
) -> ScoringProgramResult:
    """Stage the scoring program root-only and run it as root in a fresh process; raise on infrastructure failure.

    Where the layout names a scoring service, the program runs there, on a root-made copy of the workspace
    (`copy_submission`), and the services open there too: nothing it runs can reach the agent's files or processes.
    Meanwhile the agent's processes are frozen, so none of them runs beside the scoring run (contending with a
    timed run, or watching devices the two containers share).
    """
    spec = environment.spec
    if layout.scoring_service is None:
        return await run_program_in(environment, layout, services)
    async with agent_processes_paused(spec, layout):
        refusal = await copy_submission(spec, layout)
        if refusal is not None:
            return ScoringProgramResult(valid=False, message=refusal)
        return await run_program_in(environment, layout.scoring_layout, services)


async def run_program_in(
    environment: ResolvedEnvironment, layout: SandboxLayout, services: Sequence[SandboxService]
) -> ScoringProgramResult:
    """Stage the scoring program where `layout` says and run it once on `layout.workspace`, as it is."""
    box = layout.sandbox()
    await stage_in_sandbox(environment.spec, layout.code_dir, box)
    results = f"{layout.protected}/results"
    result_file = f"{results}/{uuid.uuid4().hex}.json"
    command, cwd = scoring_command(
        environment,
        **layout.program_paths,
        result=result_file,
        run_as=layout.agent_user,
        scratch=layout.scoring_scratch,
    )
    async with open_services(services, layout, "scoring") as service_env:
        try:
            # The results folder is made by the same command (each `docker compose exec` costs about 0.2 s of CPU).
            execution = await box.exec(
                ["sh", "-c", 'mkdir -p "$0" && exec "$@"', results, *command],
                cwd=cwd,
                env=service_env,
                timeout=environment.scoring_timeout_s + SCORING_TIMEOUT_MARGIN_S,
            )
        except TimeoutError as ex:
            raise ScoringInfrastructureError(f"the {environment.name} scoring program did not finish") from ex
    if not execution.success:
        raise ScoringInfrastructureError(
            f"the {environment.name} scoring program failed (exit {execution.returncode}): {execution.stderr[-3000:]}"
        )
    # Read and removed by one command; `head -c` stops at one byte over the limit, so a larger result cannot flood it.
    read = 'head -c "$1" "$0" && rm -f "$0"'
    result = await box.exec(
        ["sh", "-c", read, result_file, str(MAX_RESULT_BYTES + 1)], timeout=HARNESS_COMMAND_TIMEOUT_S
    )
    if not result.success:
        raise ScoringInfrastructureError(f"the {environment.name} scoring program wrote no result file")
    if len(result.stdout.encode()) > MAX_RESULT_BYTES:
        raise ScoringInfrastructureError(
            f"the {environment.name} scoring program wrote a result over {MAX_RESULT_BYTES} bytes"
        )
    try:
        return ScoringProgramResult.model_validate_json(result.stdout)
    except (ValidationError, json.JSONDecodeError) as ex:
        # The error's text would quote the file; its type is enough to find the scorer's bug.
        raise ScoringInfrastructureError(
            f"the {environment.name} scoring program wrote no valid result ({type(ex).__name__})"
        ) from None


@asynccontextmanager
async def agent_processes_paused(environment: EnvironmentSpec, layout: SandboxLayout) -> AsyncIterator[None]:
    """Every process of the agent's users frozen in its container for the duration (`sandbox_lib/users.py`: one kernel
    pass per user, which a fork loop cannot outrun), then exactly those continued."""
    users = agent_users(environment, layout)
    if not users:
        yield
        return
    box = layout.sandbox()
    await stage_in_sandbox(environment, layout.code_dir, box)
    freeze, cwd = users_command(layout, ["freeze", *users])
    frozen = (await checked_exec(freeze, cwd=cwd, box=box)).strip()
    try:
        yield
    finally:
        resume, cwd = users_command(layout, ["resume", "--frozen", frozen])
        await checked_exec(resume, cwd=cwd, box=box)


async def copy_submission(environment: EnvironmentSpec, layout: SandboxLayout) -> str | None:
    """Replace the scoring service's workspace with a root-made copy of the agent's (`sandbox_lib.submission`: the
    safe snapshot, without the spec's ignored files, bounded in bytes, entries, depth and path length). Returns why
    the workspace could not be copied (the entry is then invalid), else None. The parts pass through the host, one
    read at a time; both ends are root-only. Packing, moving and unpacking share one deadline
    (`SUBMISSION_COPY_TIMEOUT_S`): `pack` gets what its own limit allows of it, each later step what is left."""
    deadline = time.monotonic() + SUBMISSION_COPY_TIMEOUT_S

    def left() -> float:
        return max(1.0, deadline - time.monotonic())

    agent_box, scoring = layout.sandbox(), layout.scoring_layout
    scoring_box = scoring.sandbox()
    tools, outbox = f"{layout.protected}/submission", f"{layout.protected}/submission/out"
    await stage_files(sandbox_lib_tree(), tools, agent_box)
    ignored = [argument for pattern in environment.workspace_ignore for argument in ("--ignore", pattern)]
    arguments = ["pack", "--workspace", layout.workspace, "--out", outbox, *ignored]
    arguments += ["--max-seconds", str(SUBMISSION_PACK_TIMEOUT_S)]
    pack, cwd = sandbox_command(SUBMISSION_MODULE, arguments, python=layout.python, code_dir=tools)
    output = await checked_exec(pack, timeout=left(), cwd=cwd, box=agent_box, reads_agent_files=True)
    try:
        report = json.loads(output.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        raise ScoringInfrastructureError("copying the workspace for scoring printed no report") from None
    if "too_large" in report:
        return f"the workspace could not be copied for scoring: {report['too_large']}"
    inbox = f"{scoring.protected}/submission/in"
    await stage_files(sandbox_lib_tree(), f"{scoring.protected}/submission", scoring_box)
    for part in report["parts"]:  # one part (at most 64 MB) in memory at a time; one command each, not write_file's two
        data = await agent_box.read_file(f"{outbox}/{part}", text=False)
        await checked_exec(
            ["sh", "-c", 'mkdir -p "${0%/*}" && cat >"$0"', f"{inbox}/{part}"],
            timeout=left(),
            box=scoring_box,
            input=data,
        )
    await checked_exec(["rm", "-rf", tools], box=agent_box)
    owner = ["--owner", scoring.agent_user] if scoring.agent_user else []
    unpack, cwd = sandbox_command(
        SUBMISSION_MODULE,
        ["unpack", "--parts", inbox, "--workspace", scoring.workspace, *owner],
        python=scoring.python,
        code_dir=f"{scoring.protected}/submission",
    )
    await checked_exec(unpack, timeout=left(), cwd=cwd, box=scoring_box, reads_agent_files=True)
    return None


def score_log() -> list[ScoreEntry]:
    return list(rebench_state().score_log)


def _working_time() -> float | None:
    try:
        return sample_limits().working.usage
    except RuntimeError:
        return None


# What a scoring step that fails can raise: its own commands' failures, an `exec` past its time, an output flood.
HARNESS_STEP_FAILURES = (ScoringInfrastructureError, TimeoutError, OutputLimitExceededError)
START_LABEL, AGENT_LABEL, FINAL_LABEL = "start", "agent", "final"
# Where scoring runs, root-only: the starting workspace as the start's scoring run saw it, and the copy of it that
# the harness scores to check itself (`harness_passes_its_check`).
KEPT_START = "start-workspace"
HARNESS_CHECK = "harness-check"
# The entry a failed scoring run gives once the agent has acted: fixed sentences, nothing of the failure's text.
SUBMISSION_BROKE_SCORING = (
    "scoring failed on this workspace, and the harness then scored the starting workspace without failing: counted as "
    "invalid (code or files that use up memory, time or disk at scoring time do this)"
)
HARNESS_FAILED_ITS_CHECK = (
    "scoring could not run, and the harness also failed to score the starting workspace: counted as invalid and "
    "flagged for the operator; the next scoring run may work"
)
# Details keys of those entries (`rebench report` counts SCORING_FAILURE runs); values are fixed words, never text.
HARNESS_CHECK_KEY, HARNESS_FAILURE_KEY, FAILED_STEP_KEY = "harness_check", "harness_failure", "failed_step"


async def append_score_entry(
    environment: ResolvedEnvironment, label: str, services: Sequence[SandboxService]
) -> ScoreEntry:
    """Score the workspace and log the entry. Once the agent has acted, a failed scoring step is a verdict, never the
    sample's end: the harness checks itself on the starting workspace (`verdict_after_failure`)."""
    layout = current_layout()
    try:
        result = await run_scoring_program(environment, layout, services)
    except HARNESS_STEP_FAILURES as failure:
        if label == START_LABEL:
            raise  # nothing of the agent's has run yet: the failure is the harness's
        result = await verdict_after_failure(environment, layout, services, failure, final=label == FINAL_LABEL)
    else:
        if label == START_LABEL:
            await keep_start_workspace(layout)
    entries = score_log()
    entry = score_entry(
        environment,
        index=len(entries),
        label=label,
        wall_time_s=round(time.time() - (rebench_state().started_at or time.time()), 3),
        working_time_s=_working_time(),
        valid=result.valid,
        raw=result.raw,
        message=result.message,
        details=result.details,
    )
    state = rebench_state()
    state.score_log = [*state.score_log, entry]
    return entry


async def keep_start_workspace(layout: SandboxLayout) -> None:
    """Where scoring runs, a root-only copy of the workspace the start's scoring run just saw (the agent has not
    acted yet): what the harness scores to check itself after a failure."""
    scoring = layout.scoring_layout
    kept = f"{scoring.protected}/{KEPT_START}"
    keep = 'rm -rf "$1" && cp -a "$0" "$1"'
    await checked_exec(["sh", "-c", keep, scoring.workspace, kept], box=scoring.sandbox())


async def keep_start_workspace_again(environment: EnvironmentSpec, layout: SandboxLayout) -> None:
    """On a resume, in fresh sandboxes: the kept starting workspace as `keep_start_workspace` made it, from the
    starting workspace setup has just laid out again (copied first to the scoring service, where there is one)."""
    if layout.scoring_service is not None:
        problem = await copy_submission(environment, layout)
        if problem is not None:
            raise ScoringInfrastructureError(f"the starting workspace could not be kept again: {problem}")
    await keep_start_workspace(layout)


async def verdict_after_failure(
    environment: ResolvedEnvironment,
    layout: SandboxLayout,
    services: Sequence[SandboxService],
    failure: Exception,
    final: bool,
) -> ScoringProgramResult:
    """A scoring step failed after the agent acted: the harness's failure only if it also fails on the starting
    workspace. Passing that check, the failure was the submission's: an invalid entry, flagged `scoring_failure`.
    Failing it, an intermediate run is an invalid entry flagged `harness_failure` (the sample goes on: hours of work
    are not thrown away), and the final run raises (the sample errors and can be retried)."""
    step = type(failure).__name__
    logger.warning(f"{environment.name}: a scoring run failed ({failure}); the harness checks itself")
    if await harness_passes_its_check(environment, layout, services):
        return ScoringProgramResult(
            valid=False,
            message=SUBMISSION_BROKE_SCORING,
            details={SCORING_FAILURE: True, HARNESS_CHECK_KEY: "passed", FAILED_STEP_KEY: step},
        )
    if final:
        raise ScoringInfrastructureError(
            f"the {environment.name} final scoring run failed and so did the harness's own check on the starting "
            f"workspace: {failure}"
        ) from failure
    return ScoringProgramResult(
        valid=False,
        message=HARNESS_FAILED_ITS_CHECK,
        details={HARNESS_FAILURE_KEY: True, HARNESS_CHECK_KEY: "failed", FAILED_STEP_KEY: step},
    )


async def harness_passes_its_check(
    environment: ResolvedEnvironment, layout: SandboxLayout, services: Sequence[SandboxService]
) -> bool:
    """Score the starting workspace kept at setup, where scoring runs, in a fresh scoring context: the runner user's
    processes killed and what they left in memory removed first (and, in a scoring service, the agent users' too:
    none of their processes belong there). Whether that run ended in a result, valid or not."""
    scoring = layout.scoring_layout
    box = scoring.sandbox()
    kept, check = f"{scoring.protected}/{KEPT_START}", f"{scoring.protected}/{HARNESS_CHECK}"
    users = [RUNNER_USER, *(agent_users(environment.spec, layout) if layout.scoring_service else [])]
    try:
        await stage_in_sandbox(environment.spec, scoring.code_dir, box)
        command, cwd = users_command(scoring, ["stop", *users, "--deadline", str(STOP_DEADLINE_S)])
        await checked_exec(command, timeout=STOP_DEADLINE_S + HARNESS_COMMAND_TIMEOUT_S, cwd=cwd, box=box)
        copy = 'test -d "$0" && rm -rf "$1" && cp -a "$0" "$1"'
        await checked_exec(["sh", "-c", copy, kept, check], box=box)
        await run_program_in(environment, scoring.model_copy(update={"workspace": check}), services)
    except HARNESS_STEP_FAILURES as failure:
        logger.warning(f"{environment.name}: the harness failed its check on the starting workspace ({failure})")
        return False
    finally:
        await box.exec(["rm", "-rf", check], timeout=HARNESS_COMMAND_TIMEOUT_S)
    return True


def with_sample_anchors(environment: ResolvedEnvironment) -> ResolvedEnvironment:
    """The environment with this sample's measured anchors (`measured_anchors`), where it has them."""
    measured = rebench_state().anchors
    return environment if measured is None else environment.with_anchors(measured)


def anchors_metadata(environment: ResolvedEnvironment) -> dict:
    anchors, spec = environment.anchors, environment.spec
    y_start, y_reference = anchor_values(spec.transform, anchors)
    return {
        "scale": environment.scale,
        "raw_start": anchors.start,
        "raw_reference": anchors.reference,
        "transformed_start": y_start,
        "transformed_reference": y_reference,
        "provenance": anchors.provenance,
        "transform": spec.transform.value,
        "lower_is_better": spec.lower_is_better,
    }


def entry_score(entry: ScoreEntry, environment: ResolvedEnvironment, visible: bool) -> Score:
    """An intermediate score: what the participant may see of this one entry (`task score` under `human_cli` prints
    its answer and value; so does `task status`). With hidden scores it holds no value: the score log in the store
    and the final score's metadata keep every value for the operator."""
    return Score(
        value=participant_view(entry, visible),
        answer=f"entry {entry.index} ({entry.label})",
        explanation=describe_entry(entry, visible),
        metadata={"entry": entry.model_dump(), "anchors": anchors_metadata(environment)} if visible else None,
    )


def final_score(entries: list[ScoreEntry], environment: ResolvedEnvironment) -> Score:
    """Apply the environment's rule; no valid entry → normalised 0 and no raw value (never a raw 0)."""
    spec = environment.spec
    counted = final_entry(entries, spec.final_rule)
    if counted is None:
        value = {"normalised": 0.0, "transformed": math.nan}
        explanation = f"no valid entry in {len(entries)} scoring runs: normalised score 0"
    else:
        value = {"normalised": counted.normalised or 0.0, "transformed": counted.transformed or math.nan}
        explanation = f"{spec.final_rule.value} valid entry counts: " + describe_entry(counted, visible=True)
    return Score(
        value=value,
        answer=None if counted is None else f"entry {counted.index} ({counted.label})",
        explanation=explanation,
        metadata={
            "environment": spec.name,
            "metr_id": spec.metr_id,
            "final_rule": spec.final_rule.value,
            "valid": counted is not None,
            "raw": None if counted is None else counted.raw,
            "transformed": None if counted is None else counted.transformed,
            "normalised": value["normalised"],
            "counted_entry": None if counted is None else counted.index,
            "anchors": anchors_metadata(environment),
            "score_log": [entry.model_dump() for entry in entries],
        },
    )


ParticipantView = dict[str, bool | float | str]


def participant_view(entry: ScoreEntry, visible: bool) -> ParticipantView:
    """What one scoring run may show whoever does the task (the agent's `score` and `score_log`, a human's
    `task score`): validity and the scoring program's message (which never holds the score, docs/CONTRACT.md), and
    with visible scores the raw, transformed and normalised values of a valid entry. The one place that decides."""
    view: ParticipantView = {"valid": entry.valid}
    if visible and entry.valid:
        for name in ("raw", "transformed", "normalised"):
            value = getattr(entry, name)
            view[name] = math.nan if value is None else value
    view["message"] = entry.message
    return view


def scores_visible() -> bool:
    """This sample's setting (`-T score_visible`), which `participant_view` is given by every caller in a run."""
    return rebench_state().score_visible


def describe_entry(entry: ScoreEntry, visible: bool) -> str:
    """One line of `participant_view` (the log's explanations use the full view)."""
    view = participant_view(entry, visible)
    head = f"#{entry.index} [{entry.label}] at {entry.wall_time_s:.0f}s: {'valid' if view['valid'] else 'INVALID'}"
    if "normalised" in view:
        head += (
            f", raw={view['raw']:.6g}, transformed={view['transformed']:.4f}, normalised score={view['normalised']:.3f}"
        )
    return f"{head}. {view['message']}".strip()


# Seconds the stop goes on killing before it lists what survives: processes caught inside the kernel with SIGKILL
# pending, which never run the agent's code again.
STOP_DEADLINE_S = 60


def agent_users(environment: EnvironmentSpec, layout: SandboxLayout) -> list[str]:
    """The users whose processes are the agent's: its own and those it can start processes as (none in the local
    sandbox, which has no agent user to tell processes by)."""
    return [layout.agent_user, *environment.agent_extra_users] if layout.agent_user else []


def users_command(layout: SandboxLayout, arguments: Sequence[str]) -> tuple[list[str], str]:
    """A root command of sandbox_lib's users_cli.py (freeze, resume or stop the agent users' processes), staged."""
    return sandbox_command(USERS_MODULE, arguments, python=layout.python, code_dir=layout.code_dir)


def stop_command(environment: EnvironmentSpec, layout: SandboxLayout) -> tuple[list[str], str]:
    """The root command that freezes, then kills, every process of the agent's users (`sandbox_lib/users.py`)."""
    return users_command(layout, ["stop", *agent_users(environment, layout), "--deadline", str(STOP_DEADLINE_S)])


async def stop_agent_processes(environment: EnvironmentSpec, layout: SandboxLayout) -> dict:
    """Before the final score, end every process of the agent's users and remove what they left in memory: a loop
    left rewriting the workspace or a spinner eating the CPU must not change what the final scoring run sees or
    measures, and shared memory or tmpfs files no process holds must not starve it. Returns users_cli's report: the
    survivors (pid, uid, state), recorded with the final score (a process that will not die cannot make the sample
    fail), and counts of what was reclaimed."""
    if not agent_users(environment, layout):
        return {}
    await stage_in_sandbox(environment, layout.code_dir)
    command, cwd = stop_command(environment, layout)
    output = await checked_exec(command, timeout=STOP_DEADLINE_S + HARNESS_COMMAND_TIMEOUT_S, cwd=cwd)
    return json.loads(output)


@scorer(metrics={"normalised": [mean(), stderr()], "transformed": [mean()]}, name=SCORER_NAME)
def rebench_scorer(resolved: ResolvedEnvironment, services: Sequence[SandboxService] = ()) -> Scorer:
    """Score the workspace, append the result to the score log; at the end apply the best/last rule."""

    async def score(state: TaskState, target: Target) -> Score:
        environment = with_sample_anchors(resolved)
        if state.completed:
            stop = await stop_agent_processes(environment.spec, current_layout())
            await append_score_entry(environment, FINAL_LABEL, services)
            final = final_score(score_log(), environment)
            final.metadata = {
                **(final.metadata or {}),
                "agent_processes_surviving_the_stop": stop.get("survivors", []),
                "agent_leftovers_reclaimed": stop.get("reclaimed", {}),
            }
            return final
        label = START_LABEL if not score_log() else AGENT_LABEL
        entry = await append_score_entry(environment, label, services)
        return entry_score(entry, environment, scores_visible())

    return score
