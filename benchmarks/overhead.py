"""The harness's own overhead per `rebench score` call, for each environment at smoke scale (target: 1 s).

Each call is the command a user runs, `rebench score ENV --scale smoke --log-dir DIR` (the environment's starting
workspace), timed from outside. The workload is every run of the environment's scoring program, timed from the eval
log the call kept (the sandbox events of those runs: start to end). Overhead = the call's wall time minus that
workload: the interpreter's start and imports, the task and eval set-up, the harness's own commands in the sandbox
(workspace layout, the cached preparation, staging the scoring program), Inspect's bookkeeping and the log. A timed
environment's score call also measures its smoke anchors (`smoke_anchor_runs` runs each of the start and the
reference): those runs count as workload, and the table says how many runs a call made.

The first call of each environment may prepare its smoke assets (cold cache); it is reported apart and left out of
the overhead figures. The load average is sampled during the run: on a shared machine the figures mean little
without it.

    python benchmarks/overhead.py [ENV ...] [--calls N] [--output benchmarks/RESULTS.md]

Writes the Markdown table (with the machine's description) to --output and prints it.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from inspect_ai.log import EvalLog, list_eval_logs, read_eval_log

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.sandbox import local_problems
from rebench_inspect.runtime.staging import sandbox_module
from rebench_inspect.spec.environment import EnvironmentSpec

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 1.0
LOAD_SAMPLE_S = 5.0


@dataclass
class Call:
    wall_s: float
    program_runs: list[float]  # each scoring program run, in seconds
    before_eval_s: float  # interpreter start, imports, task and eval set-up, until Inspect started the eval
    harness_commands_s: float  # the harness's other commands and file transfers in the sandbox

    @property
    def program_s(self) -> float:
        return sum(self.program_runs)

    @property
    def overhead_s(self) -> float:
        return self.wall_s - self.program_s


def _seconds(start: datetime | str, end: datetime | str) -> float:
    start, end = (datetime.fromisoformat(t) if isinstance(t, str) else t for t in (start, end))
    return (end - start).total_seconds()


def is_scoring_program(environment: EnvironmentSpec, command: str | None) -> bool:
    """Whether a sandbox event's command runs the environment's scoring program (`staging.scoring_command`)."""
    return command is not None and sandbox_module(environment, "score") in command and "--result" in command


def program_runs(log: EvalLog, environment: EnvironmentSpec) -> tuple[list[float], float]:
    """From a kept score log: each scoring program run's seconds, and the seconds of every other sandbox event."""
    [sample] = log.samples or []
    runs, others = [], 0.0
    for event in sample.events:
        if event.event != "sandbox" or event.completed is None:
            continue
        seconds = _seconds(event.timestamp, event.completed)
        if event.action == "exec" and is_scoring_program(environment, event.cmd):
            runs.append(seconds)
        else:
            others += seconds
    return runs, others


def score_call(environment: EnvironmentSpec) -> Call:
    """One `rebench score ENV --scale smoke`, timed, with its log read back."""
    with tempfile.TemporaryDirectory(prefix="rebench-overhead-") as log_dir:
        command = [sys.executable, "-m", "rebench_inspect.cli", "score", environment.name, "--scale", "smoke"]
        started_at = datetime.now(UTC)
        started = time.perf_counter()
        completed = subprocess.run([*command, "--log-dir", log_dir], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - started
        if completed.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} exited {completed.returncode}: {completed.stderr[-2000:]}")
        [info] = list_eval_logs(log_dir)
        log = read_eval_log(info)
    runs, others = program_runs(log, environment)
    if not runs:
        raise RuntimeError(f"{environment.name}: the kept log shows no run of the scoring program")
    assert log.stats.started_at
    return Call(wall, runs, _seconds(started_at, log.stats.started_at), others)


class LoadSampler:
    """The 1-minute load average every few seconds while the benchmark runs."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(LOAD_SAMPLE_S)

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if "model name" in line
        ),
        platform.processor() or "unknown CPU",
    )
    memory_kb = next(
        int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")
    )
    return (
        f"{model}, {os.cpu_count()} logical CPUs, {memory_kb / 2**20:.0f} GiB memory, {platform.system()} "
        f"{platform.release()}, Python {platform.python_version()}"
    )


def _figure(values: list[float]) -> str:
    return f"{statistics.median(values):.2f}" + (f" ({min(values):.2f}–{max(values):.2f})" if len(values) > 1 else "")


def table_rows(results: dict[str, tuple[Call, list[Call]] | str]) -> list[str]:
    rows = [
        "| environment | first call, s | calls | wall, s | scoring program, s (runs per call) | **overhead, s** "
        "| of it: before the eval starts, s | of it: harness commands in the sandbox, s | ≤ 1 s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, result in results.items():
        if isinstance(result, str):
            rows.append(f"| {name} | not run: {result} | | | | | | | |")
            continue
        first, calls = result
        overhead = [call.overhead_s for call in calls]
        rows.append(
            f"| {name} | {first.wall_s:.1f} | {len(calls)} | {_figure([c.wall_s for c in calls])} "
            f"| {_figure([c.program_s for c in calls])} ({len(calls[0].program_runs)}) | **{_figure(overhead)}** "
            f"| {_figure([c.before_eval_s for c in calls])} | {_figure([c.harness_commands_s for c in calls])} "
            f"| {'yes' if statistics.median(overhead) <= TARGET_S else 'no'} |"
        )
    return rows


def report(results: dict, load: list[float], began: datetime, seconds: float, calls: int) -> str:
    return "\n".join(
        [
            "# Benchmarks: the harness's overhead per `rebench score` call",
            "",
            "Regenerate with `python benchmarks/overhead.py` (this file is its output; the method is in its "
            "docstring). Overhead = a call's wall time minus the time its scoring program ran (every run, the "
            "measured smoke anchors' included); target: 1 s. Medians (min–max) of the calls after the first.",
            "",
            f"- Machine: {machine()}",
            f"- Run: {began:%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min, {calls} timed calls per environment after "
            "a first one (which may prepare the smoke assets: cold cache)",
            f"- Load average (1 min) during the run: min {min(load):.1f}, median {statistics.median(load):.1f}, "
            f"max {max(load):.1f} ({len(load)} samples, every {LOAD_SAMPLE_S:g} s)",
            "",
            *table_rows(results),
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("environments", nargs="*", default=sorted(ENVIRONMENTS), metavar="ENV")
    parser.add_argument("--calls", type=int, default=3, help="timed calls per environment after the first")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    args = parser.parse_args()
    began, started = datetime.now(UTC), time.monotonic()
    results: dict[str, tuple[Call, list[Call]] | str] = {}
    with LoadSampler() as load:
        for name in args.environments:
            environment = ENVIRONMENTS[name]
            if missing := local_problems(environment):
                results[name] = "; ".join(missing).splitlines()[0]
                continue
            first = score_call(environment)
            results[name] = (first, [score_call(environment) for _ in range(args.calls)])
            print(f"{name}: done", file=sys.stderr)
    text = report(results, load.samples, began, time.monotonic() - started, args.calls)
    args.output.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
