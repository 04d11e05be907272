"""The per-sample state rebench keeps in Inspect's store, typed (one `StoreModel` instead of string keys)."""

from inspect_ai.util import StoreModel, store_as
from pydantic import BaseModel, Field

from ..spec.environment import Anchors
from ..spec.normalise import ScoreEntry
from .layout import SandboxLayout


class ResumeMark(BaseModel):
    """Where a resume from a checkpoint happened: after `score_log_entries` entries of the score log, with
    `working_time_s` of working time already used (it counts)."""

    attempt: str  # Inspect's: `resume` (the agent goes on) or `resume_for_scoring` (it had submitted)
    score_log_entries: int
    working_time_s: float | None


class RebenchState(StoreModel):
    layout: SandboxLayout | None = None
    score_visible: bool = True
    started_at: float | None = None
    # Anchors measured at this sample's setup (`measured_anchors`), which replace the environment's.
    anchors: Anchors | None = None
    # Reassign (never mutate in place): the store only sees assignments.
    score_log: list[ScoreEntry] = Field(default_factory=list)
    # Score log entries the last checkpoint holds (the default agent checkpoints after each new one).
    checkpointed_entries: int = 0
    # Where the sample resumed from a checkpoint (`checkpoints.on_resume`), oldest first.
    resumes: list[ResumeMark] = Field(default_factory=list)
    # How many of `resumes` the default agent has told the model about.
    resume_told: int = 0


def rebench_state() -> RebenchState:
    """This sample's state (inside a running sample)."""
    return store_as(RebenchState)


def current_layout() -> SandboxLayout:
    """The layout recorded for this sample by the setup step."""
    layout = rebench_state().layout
    if layout is None:
        raise RuntimeError("rebench setup has not run for this sample (no sandbox layout in the store)")
    return layout


def store_key(field: str) -> str:
    """The Inspect store key a field of `RebenchState` is kept under (as sample logs show it)."""
    if field not in RebenchState.model_fields:
        raise KeyError(field)
    return f"{RebenchState.__name__}:{field}"
