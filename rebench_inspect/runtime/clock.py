"""The agent's clock: working time used and left, and short notices at fixed fractions of the budget.

The paper's scaffolds told their agents how much time they had left; an agent that cannot see the clock cannot plan
an 8-hour budget. This is the one place that reads it: the default agent's tools and notices use it, and any
`--solver` can call `working_time()` / `time_left_sentence()` inside a sample.
"""

from dataclasses import dataclass

from inspect_ai.util import sample_limits, store

# Fractions of the working-time budget at which the default agent gets a notice (once each).
NOTICE_FRACTIONS = (0.5, 0.9)
NOTICES_SENT_KEY = "rebench:time_notices_sent"


@dataclass(frozen=True)
class WorkingTime:
    used_s: float
    limit_s: float | None  # None: the sample has no working-time limit

    @property
    def left_s(self) -> float | None:
        return None if self.limit_s is None else max(0.0, self.limit_s - self.used_s)

    @property
    def fraction_used(self) -> float | None:
        return None if not self.limit_s else self.used_s / self.limit_s


def working_time() -> WorkingTime | None:
    """This sample's working time (time waiting on the model provider does not count); None outside a sample."""
    try:
        working = sample_limits().working
    except RuntimeError:
        return None
    return WorkingTime(used_s=float(working.usage), limit_s=None if working.limit is None else float(working.limit))


def duration(seconds: float) -> str:
    """e.g. '1h 05m', '12m 03s', '42s'."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    return f"{minutes}m {secs:02d}s" if minutes else f"{secs}s"


def time_left_sentence() -> str:
    """'Working time used: 12m 03s of 2h 00m; 1h 47m left.' (empty outside a sample)."""
    clock = working_time()
    if clock is None:
        return ""
    if clock.limit_s is None or clock.left_s is None:
        return f"Working time used: {duration(clock.used_s)} (no limit)."
    return f"Working time used: {duration(clock.used_s)} of {duration(clock.limit_s)}; {duration(clock.left_s)} left."


def due_notice() -> str | None:
    """A notice for the highest budget fraction crossed since the last one, or None; each fraction is told once."""
    clock = working_time()
    if clock is None or clock.fraction_used is None:
        return None
    sent: set[float] = set(store().get(NOTICES_SENT_KEY, []))
    crossed = [fraction for fraction in NOTICE_FRACTIONS if clock.fraction_used >= fraction and fraction not in sent]
    if not crossed:
        return None
    store().set(NOTICES_SENT_KEY, sorted(sent | set(crossed)))
    return f"Time notice: {round(max(crossed) * 100)}% of your working time is used. {time_left_sentence()}"
