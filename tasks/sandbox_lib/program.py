"""The one `main` of every scoring program (docs/CONTRACT.md): an environment writes only its scoring function.

    # tasks/<name>/sandbox/score.py
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from sandbox_lib import Invalid, Scored, ScoringRun, main

    def score(run: ScoringRun) -> Scored:
        workspace = run.snapshot()          # a private copy, honouring EnvironmentSpec.workspace_ignore
        ...                                 # agent code runs through run_untrusted(..., user=run.run_as)
        if broken:
            raise Invalid("what is wrong, in words (never the score)")
        return Scored(raw=seconds, message="what was measured", details={...})

    if __name__ == "__main__":
        sys.exit(main(score))

`main` parses the arguments, makes the process a subreaper, gives the function a private work directory, writes the
result file (valid, or invalid with the `Invalid` message), turns `InfrastructureError` (and a failure of the machine:
`OSError`, `ImportError`) into a non-zero exit so the host errors the sample, and before returning removes the work
directory and kills every process that scoring started, however it was detached. Any other exception is a scorer
bug that the submission's data set off (a parser's RecursionError, an OverflowError on a huge number, torch refusing
a tensor): it is an invalid verdict with a fixed message, flagged `scoring_failure` in the details for the report,
never an errored (and retried) sample the agent could choose instead of a bad score (issue 21).
"""

from __future__ import annotations

import os
import secrets
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .processes import become_subreaper, kill_descendants
from .result import ScoringArgs, parse_scoring_args, write_result
from .snapshot import SnapshotTooLarge, snapshot_tree

# Exit status for an infrastructure failure (a missing asset, an unreachable service): the host raises.
INFRASTRUCTURE_EXIT = 2
# What the harness or the machine causes; every other exception out of a scoring function is the submission's.
HARNESS_FAILURES = (OSError, ImportError)
# The details key of a verdict that a scorer bug gave (`rebench report` counts these runs).
SCORING_FAILURE = "scoring_failure"


class Invalid(Exception):
    """The submission is invalid; the message is shown to the agent and must not contain a score."""

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.details = details or {}


class InfrastructureError(Exception):
    """Scoring itself could not run: the program exits non-zero and the sample errors (and can be retried)."""


@dataclass
class Scored:
    raw: float
    message: str
    details: dict[str, Any] = field(default_factory=dict)


class ScoringRun:
    """What a scoring function gets: the arguments, a private work directory, the snapshot, the time left."""

    def __init__(self, args: ScoringArgs, work: Path) -> None:
        self.args = args
        self.work = work
        self.details: dict[str, Any] = {"scale": args.scale}
        self.started = time.monotonic()
        self._snapshot: Path | None = None

    @property
    def workspace(self) -> Path:
        """The live workspace: read it only through `snapshot()` or a loader that runs as the agent user."""
        return self.args.workspace

    @property
    def protected(self) -> Path:
        return self.args.protected

    @property
    def scale(self) -> str:
        return self.args.scale

    @property
    def run_as(self) -> str | None:
        return self.args.run_as

    @property
    def agent_users(self) -> tuple[str, ...]:
        """Every user whose processes are the agent's: `run_as` and the users it can start processes as (none
        without `run_as`: the local sandbox has no agent user)."""
        return (self.args.run_as, *self.args.agent_extra_users) if self.args.run_as else ()

    def remaining(self) -> float:
        """Seconds left of the host's limit for this run (infinite when the host gave none)."""
        if self.args.time_limit_s is None:
            return float("inf")
        return self.args.time_limit_s - (time.monotonic() - self.started)

    def timeout(self, seconds: float) -> float:
        """A step's own limit, cut to what is left of the host's (never below one second)."""
        return max(1.0, min(seconds, self.remaining()))

    def snapshot(
        self, *, max_bytes: int | None = None, ignore: Sequence[str] | None = None, owner: str | None = None
    ) -> Path:
        """A private copy of the workspace (made once, by the first call), owned by `owner` (default: the agent
        user); files matching the ignore list, non-regular files and links leaving the workspace are left out and
        listed in `details`."""
        if self._snapshot is None:
            # The work directory is root's and unlistable; the snapshot's random name keeps other agent processes out.
            destination = self.work / f"snapshot-{secrets.token_hex(8)}"
            destination.mkdir(mode=0o755)
            limits = {"max_bytes": max_bytes} if max_bytes is not None else {}
            try:
                report = snapshot_tree(
                    self.workspace,
                    destination,
                    user=owner or self.run_as,
                    ignore=self.args.ignore if ignore is None else ignore,
                    max_seconds=max(1.0, min(120.0, self.remaining())),
                    **limits,
                )
            except SnapshotTooLarge as ex:
                raise Invalid(str(ex)) from None
            if report.skipped:
                self.details["snapshot_skipped"] = report.skipped[:50]
            self._snapshot = destination
        return self._snapshot


def main(score: Callable[[ScoringRun], Scored], argv: list[str] | None = None) -> int:
    """Run `score` under the scoring protocol; returns the process's exit status."""
    args = parse_scoring_args(argv)
    become_subreaper()
    work = Path(tempfile.mkdtemp(prefix="rebench-scoring-"))
    os.chmod(work, 0o711)
    run = ScoringRun(args, work)
    try:
        try:
            outcome = score(run)
        except Invalid as ex:
            write_result(args.result, valid=False, raw=None, message=str(ex), details={**run.details, **ex.details})
            return 0
        except InfrastructureError as ex:
            print(f"scoring could not run: {ex}", file=sys.stderr)
            return INFRASTRUCTURE_EXIT
        except HARNESS_FAILURES:
            traceback.print_exc()
            return INFRASTRUCTURE_EXIT
        except Exception as ex:  # noqa: BLE001 - the submission's data set off a scorer bug: a verdict, flagged
            trace = traceback.format_exc()
            print(trace, file=sys.stderr)
            failure = type(ex).__name__
            details = {**run.details, SCORING_FAILURE: failure, "scoring_traceback": trace[-3000:]}
            message = f"the scoring program failed on the submission ({failure}); counted as invalid"
            write_result(args.result, valid=False, raw=None, message=message, details=details)
            return 0
        write_result(
            args.result,
            valid=True,
            raw=outcome.raw,
            message=outcome.message,
            details={**run.details, **outcome.details},
        )
        return 0
    finally:
        kill_descendants()
        shutil.rmtree(work, ignore_errors=True)
