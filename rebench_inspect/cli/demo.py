"""`rebench demo`: an offline smoke run of every environment (starting and reference solution), with a verdict each."""

import argparse
import json
import os
import re
import time
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .arguments import add_environment

if TYPE_CHECKING:
    from pathlib import Path

    from inspect_ai.log import EvalLog

    from ..spec.environment import EnvironmentSpec

# What a cold cache adds to `rebench demo` on an idle 2-core machine: about 100 s measured on 2026-12-06, rounded up for
# a busier one (benchmarks/RESULTS.md; benchmarks/*_timings.py for the per-environment parts).
COLD_PREPARATION_MINUTES = 3
# A timed environment's smoke anchors as the last demo that passed it measured them, kept as an anchors file in the
# environment's cache folder and reused while its code is unchanged and the machine is as busy as it was then (the
# 1-minute load average within LOAD_TOLERANCE): measuring them costs the slowest timed environment four scoring runs,
# about 90 s, more than half of a warm demo. `--fresh` measures them again.
DEMO_ANCHORS = "demo-anchors.json"
LOAD_TOLERANCE = 0.5


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    demo = commands.add_parser("demo", help="offline smoke run of every environment (starting and reference)")
    add_environment(demo, "environments", "default: all; ", nargs="*")
    demo.add_argument("--log-dir", default="logs/demo")
    demo.add_argument("--quiet", action="store_true")
    demo.add_argument(
        "--fresh",
        action="store_true",
        help="run every reference's solve.sh and measure every timed environment's anchors again (default: reuse "
        "what an earlier demo ran from the same inputs, and the anchors it measured while the load was the same)",
    )
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


def demo_anchors_path(environment: "EnvironmentSpec") -> "Path":
    from rebench.sandbox_lib.paths import cache_root

    return cache_root() / environment.name / DEMO_ANCHORS


def remembered_anchors(environment: "EnvironmentSpec") -> tuple[str | None, str]:
    """The anchors file of what the last passing demo measured for `environment`, if it may be reused now; and why
    (not)."""
    from ..runtime.reference import environment_code_digest

    path = demo_anchors_path(environment)
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError):
        return None, "measuring its smoke anchors (no earlier demo measured them)"
    if document.get("code") != environment_code_digest(environment):
        return None, "measuring its smoke anchors (its code changed since a demo measured them)"
    load, then = os.getloadavg()[0], document["load_average"]
    if abs(load - then) > LOAD_TOLERANCE:
        return (
            None,
            f"measuring its smoke anchors (the load average is {load:.1f}, {then:.1f} when a demo measured them)",
        )
    said = (
        f"reusing the smoke anchors the demo of {document['date']} measured (load average {then:.1f}, now {load:.1f})"
    )
    return str(path), said


def remember_anchors(environment: "EnvironmentSpec", log: "EvalLog", load_average: float) -> None:
    """Keep the anchors this demo measured at the sample's setup, when the check passed with them."""
    from inspect_ai.scorer import CORRECT

    from ..runtime.measured_anchors import MEASURED_AT_SETUP
    from ..runtime.reference import environment_code_digest
    from ..spec.anchors import ANCHORS_FILE_KIND

    scores = (log.samples[0].scores or {}) if log.samples else {}
    check, scored = scores.get("anchors_reproduced"), scores.get("rebench_scorer")
    if check is None or check.value != CORRECT or scored is None or not scored.metadata:
        return
    anchors = scored.metadata["anchors"]
    if not anchors["provenance"].startswith(MEASURED_AT_SETUP):
        return
    document = {
        "kind": ANCHORS_FILE_KIND,
        "environment": environment.name,
        "scale": "smoke",
        "replaces_built_in_anchors": True,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "hardware": {},
        "anchors": {"start": anchors["raw_start"], "reference": anchors["raw_reference"]},
        "measured": anchors["provenance"],
        "load_average": load_average,
        "code": environment_code_digest(environment),
    }
    path = demo_anchors_path(environment)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # root-only, as preparation makes it
    path.write_text(json.dumps(document, indent=2) + "\n")


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
        environment = ENVIRONMENTS[name]
        anchors = None
        if environment.smoke_anchor_runs:
            anchors, said = (
                (None, "measuring its smoke anchors (--fresh)") if args.fresh else remembered_anchors(environment)
            )
            say(f"[{position}/{len(names)}] {name}: {said}")
        load_average = os.getloadavg()[0]
        started = time.monotonic()
        with nullcontext() if args.quiet else printing_progress(say):
            [log] = eval(
                sandbox_check(
                    environment=name,
                    scale="smoke",
                    sandbox="local",
                    anchors=anchors,
                    reuse_reference_run=not args.fresh,
                ),
                model="none",
                log_dir=args.log_dir,
                display="none",
            )
        rows += demo_rows(environment, log)
        if environment.smoke_anchor_runs and anchors is None:
            remember_anchors(environment, log, load_average)
        say(f"[{position}/{len(names)}] {name}: {log.status} in {time.monotonic() - started:.0f} s")
    rows.sort(key=lambda row: (row.environment, row.solution != "starting"))
    print(f"\n{'environment':<22}{'solution':<11}{'status':<9}{'raw':<24}{'normalised':>11}  verdict")
    for row in rows:
        print(f"{row.environment:<22}{row.solution:<11}{row.status:<9}{row.raw:<24}{row.normalised:>11}  {row.verdict}")
    print(
        "\nnormalised: 0 = the starting solution, 1 = the reference, on the smoke anchors (re-measured on a 2-core "
        f"CPU; not the paper's). PASS: within ±{SANDBOX_CHECK_TOLERANCE} of that (starting 0, reference 1)."
    )
    if not args.fresh:
        print(
            "A demo reuses what an earlier one did from the same inputs: each reference's solve.sh result, and a timed "
            "environment's anchors while the load average is what it was (the progress lines say which); "
            "`rebench demo --fresh` runs and measures everything again."
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
