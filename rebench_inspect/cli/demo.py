"""`rebench demo`: an offline smoke run of every environment (starting and reference solution), with a verdict each."""

import argparse
import re
import time
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .arguments import add_environment

if TYPE_CHECKING:
    from inspect_ai.log import EvalLog

    from ..spec.environment import EnvironmentSpec

# A cold `rebench demo` on a 2-core machine (README; benchmarks/*_timings.py for the per-environment parts).
COLD_PREPARATION_MINUTES = 10


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    demo = commands.add_parser("demo", help="offline smoke run of every environment (starting and reference)")
    add_environment(demo, "environments", "default: all; ", nargs="*")
    demo.add_argument("--log-dir", default="logs/demo")
    demo.add_argument("--quiet", action="store_true")
    demo.set_defaults(run=run)


@dataclass
class DemoRow:
    environment: str
    solution: str
    status: str  # valid, invalid, error, not run
    raw: str
    normalised: str
    verdict: str  # PASS, FAIL, or "-" when not run
    reason: str = ""  # why it failed, one sentence


# Inspect records an exception as its repr, `Name('text')`: the row shows the text.
_EXCEPTION_REPR = re.compile(r"^\w+\((['\"])(?P<text>.*)\1\)$", re.DOTALL)


def error_sentence(message: str) -> str:
    """What an errored sample's row says: the exception's own text."""
    message = message.strip()
    found = _EXCEPTION_REPR.match(message)
    return found.group("text") if found else message


def solution_row(environment: "EnvironmentSpec", solution: str, check: dict[str, Any]) -> DemoRow:
    """A solution's row from its check in the `anchors_reproduced` score's metadata."""
    from ..runtime.reference import landed, normalised_text
    from ..spec.environment import Transform

    raw = "-" if check["raw"] is None else f"{check['raw']:.4g} {environment.raw_unit}".strip()
    unclipped = check["normalised_unclipped"]
    normalised = "-" if unclipped is None else normalised_text(unclipped)
    reason = ""
    if not check["valid"]:
        reason = f"the scoring run found it invalid: {check['message'] or 'no message'}"
    elif not check["passed"]:
        reason = landed(check)
        if environment.transform is Transform.LOG:
            reason += " (a timed environment: single runs vary with the machine's load; rerun it)"
    status = "valid" if check["valid"] else "invalid"
    return DemoRow(environment.name, solution, status, raw, normalised, "PASS" if check["passed"] else "FAIL", reason)


def demo_rows(environment: "EnvironmentSpec", log: "EvalLog") -> list[DemoRow]:
    """Two rows from an environment's sandbox check, its one sample: the starting solution (the score log's first
    entry) and the reference (its last), each with its verdict from the `anchors_reproduced` score; one FAIL row
    saying why when there is no verdict (the sample failed, or the check could not judge it)."""

    def failed(reason: str) -> list[DemoRow]:
        return [DemoRow(environment.name, "-", "error", "-", "-", "FAIL", reason)]

    if not log.samples:
        stopped = log.error.message if log.error else ""
        return failed(stopped or "the eval stopped before any sample ran (see its log)")
    [sample] = log.samples
    check = (sample.scores or {}).get("anchors_reproduced")
    if sample.error is not None or check is None:
        reason = error_sentence(sample.error.message) if sample.error else ""
        if sample.limit is not None:
            reason = f"stopped by its {sample.limit.type} limit; {reason}"
        return failed(reason or "no score was recorded (see the log)")
    checks: dict[str, Any] = check.metadata or {}
    if not checks:
        return failed(check.explanation or "the check gave no verdict (see the log)")
    return [solution_row(environment, solution, checks[solution]) for solution in ("starting", "reference")]


def run(args: argparse.Namespace) -> int:
    from inspect_ai import eval

    from rebench.environments import ENVIRONMENTS
    from rebench.maintenance import sandbox_check
    from rebench.sandbox_lib.paths import cache_root

    from ..runtime.reference import SANDBOX_CHECK_TOLERANCE
    from ..runtime.sandbox import local_problems
    from ..tools.prepared import has_prepared_assets
    from ..tools.progress import printing_progress

    names = args.environments or list(ENVIRONMENTS)
    say = (lambda _: None) if args.quiet else (lambda text: print(text, flush=True))
    if not has_prepared_assets():
        say(
            f"First run: preparing the smoke models and data takes about {COLD_PREPARATION_MINUTES} minutes on a "
            f"2-core machine; they are cached in {cache_root()} afterwards."
        )
    # One environment at a time, so the terminal says what is running: a 2-core machine gains nothing in parallel
    # (measured: the five environments that keep no clock took 201 s in one eval at once, 186 s one after another).
    rows: list[DemoRow] = []
    for position, name in enumerate(names, start=1):
        if missing := local_problems(ENVIRONMENTS[name]):
            rows.append(DemoRow(name, "-", "not run", "-", "-", "-", "; ".join(missing)))
            say(f"[{position}/{len(names)}] {name}: not run: {rows[-1].reason}")
            continue
        say(f"[{position}/{len(names)}] {name}: preparing, then scoring the starting and the reference solution…")
        started = time.monotonic()
        with nullcontext() if args.quiet else printing_progress(say):
            [log] = eval(
                sandbox_check(environment=name, scale="smoke", sandbox="local"),
                model="none",
                log_dir=args.log_dir,
                display="none",
            )
        rows += demo_rows(ENVIRONMENTS[name], log)
        say(f"[{position}/{len(names)}] {name}: {log.status} in {time.monotonic() - started:.0f} s")
    rows.sort(key=lambda row: (row.environment, row.solution != "starting"))
    print(f"\n{'environment':<22}{'solution':<11}{'status':<9}{'raw':<24}{'normalised':>11}  verdict")
    for row in rows:
        print(f"{row.environment:<22}{row.solution:<11}{row.status:<9}{row.raw:<24}{row.normalised:>11}  {row.verdict}")
    print(
        "\nnormalised: 0 = the starting solution, 1 = the reference, on the smoke anchors (re-measured on a 2-core "
        f"CPU; not the paper's). PASS: within ±{SANDBOX_CHECK_TOLERANCE} of that (starting 0, reference 1)."
    )
    for row in rows:
        if row.verdict == "FAIL":
            print(f"FAIL {row.environment} {row.solution}: {row.reason}")
        elif row.status == "not run":
            print(f"{row.environment} was not run: {row.reason}")
    print(f"\nInspect logs in {args.log_dir}: open them with `inspect view --log-dir {args.log_dir}`")
    # An environment asked for by name that could not run is a failure; in the default run over all, a listed gap.
    failed = any(row.verdict == "FAIL" or (args.environments and row.status == "not run") for row in rows)
    return 1 if failed else 0
