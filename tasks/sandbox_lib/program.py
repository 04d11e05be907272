"""The one `main` of every scoring program (docs/CONTRACT.md): an environment writes only its scoring function.

    # tasks/<name>/sandbox/score.py, run as `python -m rebench.<name>.sandbox.score ...`
    import sys

    from rebench.sandbox_lib import Invalid, Reason, Scored, ScoringRun, main

    BROKEN = Reason("what is wrong, in words (never the score), e.g. {count} of the {total} outputs are wrong")
    MEASURED = Reason("what was measured")

    def score(run: ScoringRun) -> Scored:
        workspace = run.snapshot()          # a private copy, honouring EnvironmentSpec.workspace_ignore
        ...                                 # agent code runs through run_untrusted(..., user=run.run_as)
        if broken:
            raise Invalid(BROKEN, count=wrong, total=len(cases))   # numbers the scorer computed, never text
        return Scored(raw=seconds, message=MEASURED, details={"cases": len(cases)})

    if __name__ == "__main__":
        sys.exit(main(score))

`main` parses the arguments, makes the process a subreaper, gives the function a private work directory (in the
host's root-only `--scratch` folder, which also becomes every temporary file's place: the agent can fill /tmp),
writes the result file (valid, or invalid with the `Invalid` reason), turns `InfrastructureError` (and a failure of
the machine: `OSError`, `ImportError`) into a non-zero exit so the host errors the sample, and before returning
removes the work directory and kills every process that scoring started, however it was detached. Any other
exception is a scorer bug that the submission's data set off (a parser's RecursionError, an OverflowError on a huge
number, torch refusing a tensor): it is an invalid verdict with a fixed reason, flagged `scoring_failure: true` in
the details for the report, never an errored (and retried) sample the agent could choose instead of a bad score
(issue 21). Messages are `Reason`s and details plain numbers (result.py): nothing the agent's code wrote or printed
is ever quoted, in the result or on stderr (which reaches the log), so a scorer bug prints only its own files and
lines.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .isolation import Quarantine, reached_the_agent, runner_user, sweep_flags
from .processes import become_subreaper, kill_descendants
from .result import Reason, ScoringArgs, parse_scoring_args, write_result
from .snapshot import SnapshotTooLarge, snapshot_tree

# Exit status for an infrastructure failure (a missing asset, an unreachable service): the host raises.
INFRASTRUCTURE_EXIT = 2
# What the harness or the machine causes; every other exception out of a scoring function is the submission's.
HARNESS_FAILURES = (OSError, ImportError)
# The details key of a verdict that a scorer bug gave (`rebench report` counts these runs).
SCORING_FAILURE = "scoring_failure"
SCORER_FAILED = Reason("the scoring program failed on the submission; counted as invalid")
SCRATCH_NOT_ROOTS = Reason("the scratch folder is not root's alone")
NO_GPU = Reason(
    "full-scale scoring needs {needed} GPU(s) and this sandbox sees {visible}: run it on a GPU machine with the NVIDIA "
    "container runtime (`rebench preflight ENV` says what is missing), or use the smoke scale"
)


# Set by tests that run the full-scale scoring path at toy size on a CPU; the host never sets it, and the agent cannot
# set the scoring program's environment.
FULL_SCALE_ON_CPU = "REBENCH_FULL_SCALE_ON_CPU"


def visible_gpus() -> int:
    """The CUDA devices torch can use here (0 without a driver, a device, or a CUDA build of torch)."""
    import torch  # only the scoring programs that need GPUs ask, and they all have torch

    return torch.cuda.device_count()


class Invalid(Exception):
    """The submission is invalid: `Invalid(TOO_SLOW, limit_s=600)` shows the agent `TOO_SLOW` with its fields
    filled (numbers the scorer computed; never the score). Anything but a `Reason` is refused (TypeError)."""

    def __init__(self, reason: Reason, details: dict[str, Any] | None = None, **values: Any) -> None:
        if not isinstance(reason, Reason):
            raise TypeError(f"Invalid takes a Reason, not {type(reason).__name__}")
        self.template = reason  # the declared sentence, for a caller that tells one refusal from another
        self.reason = reason.format(**values)
        super().__init__(str(self.reason))
        self.details = details or {}


class InfrastructureError(Exception):
    """Scoring itself could not run: the program exits non-zero and the sample errors (and can be retried).
    `InfrastructureError(MISSING_DATA)`: a `Reason` like `Invalid`'s, since stderr reaches the log."""

    def __init__(self, reason: Reason, **values: Any) -> None:
        if not isinstance(reason, Reason):
            raise TypeError(f"InfrastructureError takes a Reason, not {type(reason).__name__}")
        self.reason = reason.format(**values)
        super().__init__(str(self.reason))


@dataclass
class Scored:
    raw: float
    message: Reason  # filled: `MEASURED.format(seconds=...)`
    details: dict[str, Any] = field(default_factory=dict)


class ScoringRun:
    """What a scoring function gets: the arguments, a private work directory, the snapshot, the time left."""

    def __init__(self, args: ScoringArgs, work: Path) -> None:
        self.args = args
        self.work = work
        self.details: dict[str, Any] = {}
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

    @contextmanager
    def untrusted(self, reached_the_agent_reason: Reason) -> Iterator[str | None]:
        """The one door for the agent's code at scoring time: yields the user to run it as (the dedicated runner where
        the image has one, `runner_user`), with every process of the agent's users frozen meanwhile (`Quarantine`).
        However the body ends, every process scoring started is killed and the runner's traces swept; the details
        say whether a runner ran and what the sweep found (never which). When the body ended normally and the sweep
        shows the code wrote where the agent reads, the run is invalid with `reached_the_agent_reason`. Start the
        code with `run_untrusted` or `demote_to`, which put it first in line for the OOM killer."""
        user = runner_user(self.run_as)
        self.details["runner_user"] = user is not None
        with Quarantine(self.agent_users, user) as quarantine:
            try:
                yield user
            finally:
                kill_descendants()
                sweep = quarantine.sweep()
                self.details["isolation"] = sweep_flags(sweep)
        if reached_the_agent(sweep):
            raise Invalid(reached_the_agent_reason)

    def snapshot(
        self, *, max_bytes: int | None = None, ignore: Sequence[str] | None = None, owner: str | None = None
    ) -> Path:
        """A private copy of the workspace (made once, by the first call), owned by `owner` (default: the agent
        user); files matching the ignore list, non-regular files and links leaving the workspace are left out (`details`
        say whether any were)."""
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
                raise Invalid(ex.reason) from None
            # Whether files were left out, never which or how many (the agent can list its own workspace).
            self.details["snapshot_skipped_files"] = bool(report.skipped)
            self._snapshot = destination
        return self._snapshot


def print_bug(error: BaseException) -> None:
    """Where the scoring program failed (its own files and lines) and the exception's type, without the exception's
    text, which may quote what the agent's code wrote (a key, a line of output)."""
    frames = traceback.format_list(traceback.extract_tb(error.__traceback__))
    print(f"scoring program bug: {type(error).__name__}\n{''.join(frames)}"[-3000:], file=sys.stderr)


def use_scratch(scratch: Path) -> None:
    """Make `scratch` the temporary space of this process and of the root processes it starts (TMPDIR): a folder
    only root can write, so that an agent that filled /tmp (or raced for names in it) cannot make scoring fail.
    Everyone may pass through it (mode 711), as into the work directory, to reach a snapshot by its secret name."""
    scratch.mkdir(mode=0o711, parents=True, exist_ok=True)
    status = os.lstat(scratch)
    if not stat.S_ISDIR(status.st_mode) or status.st_uid != os.geteuid() or status.st_mode & 0o022:
        raise InfrastructureError(SCRATCH_NOT_ROOTS)
    tempfile.tempdir = os.environ["TMPDIR"] = str(scratch)


def main(score: Callable[[ScoringRun], Scored], argv: list[str] | None = None, *, gpus_at_full_scale: int = 0) -> int:
    """Run `score` under the scoring protocol; returns the process's exit status. `gpus_at_full_scale`: the GPUs the
    scoring function needs at full scale; with fewer visible, scoring refuses to start (`NO_GPU`, an infrastructure
    failure) rather than run the full-scale work on a CPU for hours or fail halfway."""
    args = parse_scoring_args(argv)
    become_subreaper()
    work: Path | None = None
    try:
        if args.scale == "full" and gpus_at_full_scale and os.environ.get(FULL_SCALE_ON_CPU) != "1":
            visible = visible_gpus()
            if visible < gpus_at_full_scale:
                raise InfrastructureError(NO_GPU, needed=gpus_at_full_scale, visible=visible)
        if args.scratch is not None:
            use_scratch(args.scratch)
        work = Path(tempfile.mkdtemp(prefix="rebench-scoring-"))
        os.chmod(work, 0o711)
        run = ScoringRun(args, work)
        try:
            outcome = score(run)
            verdict: dict[str, Any] = {"valid": True, "raw": outcome.raw, "message": outcome.message}
            details = {**run.details, **outcome.details}
        except Invalid as ex:
            verdict, details = {"valid": False, "raw": None, "message": ex.reason}, {**run.details, **ex.details}
        except (InfrastructureError, *HARNESS_FAILURES):
            raise
        except Exception as ex:  # noqa: BLE001 - the submission's data set off a scorer bug: a verdict, flagged
            print_bug(ex)
            verdict = {"valid": False, "raw": None, "message": SCORER_FAILED}
            details = {**run.details, SCORING_FAILURE: True}
        write_result(args.result, **verdict, details=details)
        return 0
    except InfrastructureError as ex:
        print(f"scoring could not run: {ex.reason}", file=sys.stderr)
        return INFRASTRUCTURE_EXIT
    except Exception as ex:  # noqa: BLE001 - the machine's failure (HARNESS_FAILURES) or a bug writing the result
        print_bug(ex)
        return INFRASTRUCTURE_EXIT
    finally:
        kill_descendants()
        if work is not None:
            shutil.rmtree(work, ignore_errors=True)
