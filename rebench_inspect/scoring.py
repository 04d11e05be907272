"""Scoring: run an environment's scoring program in the sandbox, keep the score log, pick the final score.

Every scoring run (the starting workspace after setup, each use of the agent's `score` tool or of
`task score` under `human_cli`, and the final pass) goes through the one `rebench_scorer`. Inspect's
intermediate-scoring API (`inspect_ai.scorer.score`) calls it during the run, so each entry appears as an
"Intermediate Score" in the viewer; Inspect's final scoring pass calls it once more after the agent stops.
"""

import json
import math
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Literal

from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
from inspect_ai.solver import TaskState
from inspect_ai.util import sample_limits, sandbox
from pydantic import BaseModel, ValidationError, field_validator

from .environment import EnvironmentSpec, Scale
from .layout import SandboxLayout, current_layout
from .normalise import ScoreEntry, anchor_values, final_entry, score_entry
from .staging import scoring_command, staged_tree
from .state import rebench_state
from .timeouts import HARNESS_COMMAND_TIMEOUT_S, SCORING_TIMEOUT_MARGIN_S

SCORER_NAME = "rebench_scorer"

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


async def stage_in_sandbox(environment: EnvironmentSpec, destination: str) -> None:
    """Replace `destination` with a fresh copy of the staged tree, writable and readable by root only."""
    box = sandbox()
    await checked_exec(["sh", "-c", f'rm -rf "{destination}" && mkdir -p "{destination}" && chmod 700 "{destination}"'])
    for relative, source in staged_tree(environment).items():
        await box.write_file(f"{destination}/{relative}", source.read_bytes())


async def checked_exec(cmd: list[str], timeout: int = HARNESS_COMMAND_TIMEOUT_S, cwd: str | None = None) -> str:
    """A harness command in the sandbox (as root); its failure is an infrastructure error."""
    result = await sandbox().exec(cmd, timeout=timeout, cwd=cwd)
    if not result.success:
        raise ScoringInfrastructureError(f"sandbox command failed: {' '.join(cmd)}: {result.stderr[-3000:]}")
    return result.stdout


async def run_scoring_program(
    environment: EnvironmentSpec,
    scale: Scale,
    layout: SandboxLayout,
    services: Sequence[SandboxService] = (),
) -> ScoringProgramResult:
    """Stage the scoring program root-only and run it as root in a fresh process; raise on infrastructure failure."""
    await stage_in_sandbox(environment, layout.scoring_dir)
    result_file = f"{layout.protected}/results/{uuid.uuid4().hex}.json"
    await checked_exec(["mkdir", "-p", f"{layout.protected}/results"])
    command = scoring_command(
        environment,
        scale,
        python=layout.python,
        scoring_dir=layout.scoring_dir,
        workspace=layout.workspace,
        protected=layout.protected,
        result=result_file,
        run_as=layout.agent_user,
    )
    async with open_services(services, layout, "scoring") as service_env:
        try:
            execution = await sandbox().exec(
                command,
                cwd=layout.protected,
                env=service_env,
                timeout=environment.scoring_timeout_s[scale] + SCORING_TIMEOUT_MARGIN_S,
            )
        except TimeoutError as ex:
            raise ScoringInfrastructureError(f"the {environment.name} scoring program did not finish") from ex
    if not execution.success:
        raise ScoringInfrastructureError(
            f"the {environment.name} scoring program failed (exit {execution.returncode}): {execution.stderr[-3000:]}"
        )
    try:
        text = await sandbox().read_file(result_file)
        await sandbox().exec(["rm", "-f", result_file])
        if len(text.encode()) > MAX_RESULT_BYTES:
            raise ScoringInfrastructureError(
                f"the {environment.name} scoring program wrote a result over {MAX_RESULT_BYTES} bytes"
            )
        return ScoringProgramResult.model_validate_json(text)
    except (FileNotFoundError, ValidationError, json.JSONDecodeError) as ex:
        # The error's text would quote the file; its type is enough to find the scorer's bug.
        raise ScoringInfrastructureError(
            f"the {environment.name} scoring program wrote no valid result ({type(ex).__name__})"
        ) from None


def score_log() -> list[ScoreEntry]:
    return list(rebench_state().score_log)


def _working_time() -> float | None:
    try:
        return sample_limits().working.usage
    except RuntimeError:
        return None


async def append_score_entry(
    environment: EnvironmentSpec, scale: Scale, label: str, services: Sequence[SandboxService]
) -> ScoreEntry:
    layout = current_layout()
    result = await run_scoring_program(environment, scale, layout, services)
    entries = score_log()
    entry = score_entry(
        environment,
        scale,
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


def anchors_metadata(environment: EnvironmentSpec, scale: Scale) -> dict:
    anchors = environment.anchors[scale]
    y_start, y_reference = anchor_values(environment, anchors)
    return {
        "scale": scale,
        "raw_start": anchors.start,
        "raw_reference": anchors.reference,
        "transformed_start": y_start,
        "transformed_reference": y_reference,
        "provenance": anchors.provenance,
        "transform": environment.transform.value,
        "lower_is_better": environment.lower_is_better,
    }


def entry_score(entry: ScoreEntry, environment: EnvironmentSpec, scale: Scale) -> Score:
    """An intermediate score: the value of this one entry (NaN when invalid)."""
    return Score(
        value={
            "normalised": entry.normalised if entry.normalised is not None else math.nan,
            "transformed": entry.transformed if entry.transformed is not None else math.nan,
        },
        answer=f"entry {entry.index} ({entry.label})",
        explanation=describe_entry(entry, visible=True),
        metadata={"entry": entry.model_dump(), "anchors": anchors_metadata(environment, scale)},
    )


def final_score(entries: list[ScoreEntry], environment: EnvironmentSpec, scale: Scale) -> Score:
    """Apply the environment's rule; no valid entry → normalised 0 and no raw value (never a raw 0)."""
    counted = final_entry(entries, environment.final_rule)
    if counted is None:
        value = {"normalised": 0.0, "transformed": math.nan}
        explanation = f"no valid entry in {len(entries)} scoring runs: normalised score 0"
    else:
        value = {"normalised": counted.normalised or 0.0, "transformed": counted.transformed or math.nan}
        explanation = f"{environment.final_rule.value} valid entry counts: " + describe_entry(counted, visible=True)
    return Score(
        value=value,
        answer=None if counted is None else f"entry {counted.index} ({counted.label})",
        explanation=explanation,
        metadata={
            "environment": environment.name,
            "metr_id": environment.metr_id,
            "final_rule": environment.final_rule.value,
            "valid": counted is not None,
            "raw": None if counted is None else counted.raw,
            "transformed": None if counted is None else counted.transformed,
            "normalised": value["normalised"],
            "counted_entry": None if counted is None else counted.index,
            "anchors": anchors_metadata(environment, scale),
            "score_log": [entry.model_dump() for entry in entries],
        },
    )


def describe_entry(entry: ScoreEntry, visible: bool) -> str:
    """One line for the agent (hidden variant: validity only) or for the log."""
    head = f"#{entry.index} [{entry.label}] at {entry.wall_time_s:.0f}s: {'valid' if entry.valid else 'INVALID'}"
    if visible and entry.valid:
        head += f", raw={entry.raw:.6g}, transformed={entry.transformed:.4f}, normalised score={entry.normalised:.3f}"
    return f"{head}. {entry.message}".strip()


# The agent's user owns nothing that may run on once its time is up: repeated, so that forks racing the kill die too.
_KILL_AGENT_PROCESSES = (
    'for attempt in 1 2 3 4 5 6 7 8 9 10; do pkill -KILL -u "$1"; pgrep -u "$1" >/dev/null || exit 0; sleep 0.2; done; '
    'echo "processes of $1 survive: $(pgrep -u "$1" -l | head -n 5)" >&2; exit 1'
)


async def stop_agent_processes(layout: SandboxLayout) -> None:
    """Before the final score, end every process of the agent user: a loop left rewriting the workspace or a spinner
    eating the CPU must not change what the final scoring run sees or measures. Without a user switch (the local
    sandbox) there is no agent user to tell processes by, and nothing is stopped."""
    if layout.agent_user:
        await checked_exec(["sh", "-c", _KILL_AGENT_PROCESSES, "stop-agent", layout.agent_user])


@scorer(metrics={"normalised": [mean(), stderr()], "transformed": [mean()]}, name=SCORER_NAME)
def rebench_scorer(environment: EnvironmentSpec, scale: Scale, services: Sequence[SandboxService] = ()) -> Scorer:
    """Score the workspace, append the result to the score log; at the end apply the best/last rule."""

    async def score(state: TaskState, target: Target) -> Score:
        if state.completed:
            await stop_agent_processes(current_layout())
            await append_score_entry(environment, scale, "final", services)
            return final_score(score_log(), environment, scale)
        label = "start" if not score_log() else "agent"
        entry = await append_score_entry(environment, scale, label, services)
        return entry_score(entry, environment, scale)

    return score
