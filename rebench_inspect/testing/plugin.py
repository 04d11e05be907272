"""rebench's pytest plugin (tests/conftest.py loads it): every test tier has a wall-clock budget.

A test belongs to the tier its marker names (`docker`, `slow`, `fuzz`; a test with none is `fast`). The plugin adds
up, per tier, the time each test took from its setup to its teardown (so a session fixture's build counts once, in
the first test that uses it), and fails the run when a tier's total passes its budget. The budgets are the ini options
`rebench_budget_<tier>` in seconds (`[tool.pytest.ini_options]` in pyproject.toml; `-o rebench_budget_fast=...`
for one run; 0 means no limit), set from `--durations` on a loaded 2-core machine with room to spare: a tier that
outgrows its budget is a slower CI that nobody decided on.
"""

import time
from collections import defaultdict
from collections.abc import Iterator

import pytest

MARKED_TIERS = ("docker", "slow", "rehearsal", "fuzz")
TIERS = ("fast", *MARKED_TIERS)


def tier_of(item: pytest.Item) -> str:
    return next((tier for tier in MARKED_TIERS if item.get_closest_marker(tier)), "fast")


class TierClock:
    """The time spent per tier in this run, against the budgets."""

    def __init__(self, budgets: dict[str, float]) -> None:
        self.budgets = budgets
        self.spent: dict[str, float] = defaultdict(float)

    def overruns(self) -> list[str]:
        return [
            f"the {tier} tier's tests took {self.spent[tier]:.0f} s, over its budget of {budget:g} s "
            f"(rebench_budget_{tier})"
            for tier, budget in self.budgets.items()
            if budget and self.spent[tier] > budget
        ]

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        started = time.monotonic()
        try:
            return (yield)
        finally:
            self.spent[tier_of(item)] += time.monotonic() - started

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if self.overruns() and exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter) -> None:  # type: ignore[no-untyped-def]
        for overrun in self.overruns():
            terminalreporter.write_line(f"FAILED (time budget): {overrun}", red=True, bold=True)


def pytest_addoption(parser: pytest.Parser) -> None:
    for tier in TIERS:
        parser.addini(
            f"rebench_budget_{tier}",
            f"seconds the {tier} tier's tests may take together in one run (0: no limit)",
            default="0",
        )


def pytest_configure(config: pytest.Config) -> None:
    budgets = {tier: float(config.getini(f"rebench_budget_{tier}")) for tier in TIERS}
    config.pluginmanager.register(TierClock(budgets), "rebench-tier-clock")
