"""Checkpoints of a long sample and its resume, through Inspect's own mechanism (`Task(checkpoint=...)`, resumed by
`inspect eval-retry`).

A checkpoint holds what the agent made: its home (the workspace, and what it installs there: `~/.local`, caches, its
notes) and the sample store (score log, clock notices). Never the root-only protected folder (held-out data, staged
code, proxies' records) nor the scoring service: both are rebuilt from the image and the prepared assets by the
setup step, which on a resume does everything but score the start (`resuming`). `/tmp` and `/var/tmp` are scratch
and the agent's running processes cannot be kept: the agent is told so (`on_resume`).

Sandboxes are archived with tar (`ArchiveSnapshots`): nothing is injected into the image. Inspect still runs restic
on the host for the sample's own context (store, transcript), from its cache (`~/.cache/inspect_ai/bin`).
"""

from datetime import timedelta
from typing import Literal

from inspect_ai.solver import TaskState
from inspect_ai.util import (
    ArchiveSnapshots,
    CheckpointConfig,
    ResumeReport,
    SandboxSnapshotConfig,
    TimeInterval,
    current_checkpointer,
)

from .clock import time_left_sentence, working_time
from .layout import CONTAINER_HOME
from .sandbox import SCORING_SERVICE
from .state import ResumeMark, rebench_state

DEFAULT_CHECKPOINT_MINUTES = 30
# Sandboxes Inspect can snapshot and recreate as they were; the local sandbox's folder is new on each attempt.
CHECKPOINTED_SANDBOXES = ("docker", "k8s")

Attempt = Literal["initial", "resume", "resume_for_scoring"]


def checkpoint_config(sandbox_type: str, every_minutes: float) -> CheckpointConfig | Literal[False]:
    """The task's checkpoints: every `every_minutes` of wall-clock time (Inspect's `TimeInterval`) and after each
    `score` call, for container sandboxes; off (`False`) for the local sandbox or `every_minutes` 0."""
    if sandbox_type not in CHECKPOINTED_SANDBOXES or every_minutes == 0:
        return False
    return CheckpointConfig(
        trigger=TimeInterval(every=timedelta(minutes=every_minutes)),
        sandbox_paths={
            "default": SandboxSnapshotConfig(paths=[CONTAINER_HOME], strategy=ArchiveSnapshots()),
            SCORING_SERVICE: [],
        },
    )


def resuming() -> Attempt:
    """This attempt of the sample, known from setup on (Inspect tells it only once the agent has entered its
    checkpointer, after setup has run; Inspect 0.3.285 keeps it on the active sample's checkpointer setup)."""
    from inspect_ai.log._samples import sample_active

    active = sample_active()
    resume = getattr(active.checkpointer, "_resume_checkpoint", None) if active is not None else None
    return "initial" if resume is None else resume.attempt


async def checkpoint_if_scored() -> None:
    """A scored state is the one worth keeping: at a turn boundary (the conversation whole), checkpoint if the score
    log has grown since the last checkpoint."""
    checkpointer, store = current_checkpointer(), rebench_state()
    if checkpointer is None or len(store.score_log) <= store.checkpointed_entries:
        return
    store.checkpointed_entries = len(store.score_log)
    await checkpointer.checkpoint()


def resume_notice() -> str | None:
    """The resume's message for the agent, once (the default agent's first turn boundary after a resume)."""
    checkpointer = current_checkpointer()
    report = None if checkpointer is None else checkpointer.restored
    store = rebench_state()
    if report is None or not report.message or store.resume_told == len(store.resumes):
        return None
    store.resume_told = len(store.resumes)
    return report.message


async def on_resume(state: TaskState, attempt: Attempt) -> ResumeReport:
    """After Inspect restored the store and the agent's home: mark the score log, and tell the agent what it has."""
    store = rebench_state()
    clock = working_time()
    mark = ResumeMark(
        attempt=attempt,
        score_log_entries=len(store.score_log),
        working_time_s=None if clock is None else round(clock.used_s, 3),
    )
    store.resumes = [*store.resumes, mark]
    return ResumeReport(
        message=(
            "The run was interrupted and has resumed from its last checkpoint. Your home folder and workspace are as "
            "they were then (later changes are lost), your score log is whole, and the working time used before "
            "counts. Processes you had running were stopped: start again any you need. "
            f"{time_left_sentence()}"
        ).strip()
    )
