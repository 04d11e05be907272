"""The per-sample state rebench keeps in Inspect's store, typed (one `StoreModel` instead of string keys)."""

from inspect_ai.util import StoreModel, store_as
from pydantic import Field

from ..spec.environment import Anchors
from ..spec.normalise import ScoreEntry
from .layout import SandboxLayout


class RebenchState(StoreModel):
    layout: SandboxLayout | None = None
    score_visible: bool = True
    started_at: float | None = None
    # Anchors measured at this sample's setup (`measured_anchors`), which replace the environment's.
    anchors: Anchors | None = None
    # Reassign (never mutate in place): the store only sees assignments.
    score_log: list[ScoreEntry] = Field(default_factory=list)


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
