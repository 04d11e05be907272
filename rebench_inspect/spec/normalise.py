"""Raw score → transformed score → normalised score, and the rule that picks the final entry (docs/benchmark.md).

Pure functions and data, no Inspect: the same code serves the scorer, the CLI and the tests.
"""

import math
from collections.abc import Sequence

from pydantic import BaseModel

from .environment import Anchors, FinalRule, ResolvedEnvironment, Transform

# Irreducible OpenWebText loss subtracted before taking the log of a loss (docs/benchmark.md).
IRREDUCIBLE_LOSS = 1.5


def transform(kind: Transform, raw: float) -> float:
    """The transformed score y; NaN where the transform is undefined (e.g. a loss at or below 1.5)."""
    if kind is Transform.IDENTITY:
        return float(raw)
    shifted = raw - IRREDUCIBLE_LOSS if kind is Transform.LOG_LOSS else raw
    return math.log(shifted) if shifted > 0 else math.nan


def raw_from_y(kind: Transform, y: float) -> float:
    """The inverse of the transform: the raw value whose transformed score is y."""
    if kind is Transform.IDENTITY:
        return y
    return math.exp(y) + (IRREDUCIBLE_LOSS if kind is Transform.LOG_LOSS else 0.0)


def normalise_unclipped(y: float, y_start: float, y_reference: float) -> float:
    """(y − y_start) / (y_ref − y_start): start → 0, reference → 1, whichever direction is better."""
    return (y - y_start) / (y_reference - y_start)


def normalise(y: float, y_start: float, y_reference: float) -> float:
    """Normalised score, clipped below at 0 (worse than the start) and not above (docs/benchmark.md)."""
    return max(0.0, normalise_unclipped(y, y_start, y_reference))


class ScoreEntry(BaseModel):
    """One line of the score log. The log lives in the Inspect store, never in the sandbox."""

    index: int
    label: str  # "start", "agent" or "final"
    wall_time_s: float  # since the sample started
    working_time_s: float | None
    valid: bool
    raw: float | None
    transformed: float | None
    normalised: float | None
    normalised_unclipped: float | None
    message: str
    details: dict = {}


def score_entry(
    environment: ResolvedEnvironment,
    *,
    index: int,
    label: str,
    wall_time_s: float,
    working_time_s: float | None,
    valid: bool,
    raw: float | None,
    message: str,
    details: dict | None = None,
) -> ScoreEntry:
    """Build a log entry from a scoring program's result, applying transform and anchors."""
    y = transform(environment.spec.transform, raw) if valid and raw is not None else math.nan
    if not math.isfinite(y):
        valid = False
        if raw is not None and message:
            message = f"{message} (score undefined for this value)"
    y_start, y_ref = anchor_values(environment.spec.transform, environment.anchors)
    unclipped = normalise_unclipped(y, y_start, y_ref) if valid else None
    return ScoreEntry(
        index=index,
        label=label,
        wall_time_s=wall_time_s,
        working_time_s=working_time_s,
        valid=valid,
        raw=raw if valid else None,
        transformed=y if valid else None,
        normalised=max(0.0, unclipped) if unclipped is not None else None,
        normalised_unclipped=unclipped,
        message=message,
        details=details or {},
    )


def anchor_values(kind: Transform, anchors: Anchors) -> tuple[float, float]:
    """Transformed (y_start, y_ref)."""
    return transform(kind, anchors.start), transform(kind, anchors.reference)


def final_entry(entries: Sequence[ScoreEntry], rule: FinalRule) -> ScoreEntry | None:
    """The entry that counts: best valid (by normalised score, so smoke anchors of either sign work) or last valid."""
    valid = [entry for entry in entries if entry.valid and entry.normalised_unclipped is not None]
    if not valid:
        return None
    if rule is FinalRule.LAST:
        return valid[-1]
    return max(valid, key=lambda entry: entry.normalised_unclipped or 0.0)
