"""The harness's own overhead per score call, for each environment at smoke scale (target: 1 s), two ways.

In an eval: the agent's `score` tool. One eval per environment on the local sandbox, whose scripted agent (mockllm,
no model) calls `score` on the starting workspace several times, then submits. A call's time is its tool event in
the log; the workload is every run of the scoring program inside it (sandbox events: start to end); the overhead is
the rest: staging the scoring program, copying the workspace, the quarantine's commands, the verdict, the score log.
This is the cost an agent's working time pays at every score. Inspect's log can lack the sandbox event of a call's
scoring program (seen on the first call of the environments whose scoring reaches a model through the agent bridge,
finetune_target and rust_codecontests): such a call cannot be split, so it is left out and the table says how many
calls were timed.

On the command line: `rebench score ENV --scale smoke --log-dir DIR` (the environment's starting workspace), timed
from outside, with the workload read from the log it kept. Its overhead adds the interpreter's start and imports
(Inspect loads every installed `inspect_ai` entry point: the table lists them), the task and eval set-up, the
cached preparation and Inspect's bookkeeping. A timed environment's call also measures its smoke anchors
(`smoke_anchor_runs` runs each of the start and the reference): those runs count as workload, and the table says
how many runs a call made. The first call of each environment may prepare its smoke assets (cold cache); it is
reported apart and left out of the overhead figures.

The load average is sampled during the run: on a shared machine the figures mean little without it.

    python benchmarks/overhead.py [ENV ...] [--calls N] [--output benchmarks/RESULTS.md]

Writes the Markdown tables (with the machine's description) to --output and prints them.
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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.event import ToolEvent
from inspect_ai.log import EvalLog, EvalSample, list_eval_logs, read_eval_log

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.runtime.sandbox import local_problems
from rebench_inspect.runtime.staging import sandbox_module
from rebench_inspect.spec.environment import EnvironmentSpec
from rebench_inspect.testing.scripted import scripted_agent, tool_call

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


def program_runs(
    log: EvalLog, environment: EnvironmentSpec, within: tuple[datetime, datetime] | None = None
) -> tuple[list[float], float]:
    """From a kept log: each scoring program run's seconds, and the seconds of every other sandbox event (only the
    events that began `within` a span of time, where given)."""
    [sample] = log.samples or []
    runs, others = [], 0.0
    for event in sample.events:
        if event.event != "sandbox" or event.completed is None:
            continue
        if within is not None and not within[0] <= event.timestamp <= within[1]:
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
    runs, others = program_runs(log, environment)  # empty where the log lacks the program's event (see cli_cells)
    assert log.stats.started_at
    return Call(wall, runs, _seconds(started_at, log.stats.started_at), others)


@dataclass
class ToolCall:
    wall_s: float  # the agent's `score` tool call, start to end
    program_runs: list[float]
    harness_commands_s: float

    @property
    def overhead_s(self) -> float:
        return self.wall_s - sum(self.program_runs)


def score_tool_calls(environment: EnvironmentSpec, task: Task, calls: int, log_dir: str) -> list[ToolCall]:
    """One eval of the environment's `task` whose scripted agent calls `score` `calls` times on the starting
    workspace, then submits."""
    agent = scripted_agent([tool_call("score") for _ in range(calls)])
    [log] = inspect_eval(task, model=agent, display="none", log_dir=log_dir)
    if log.status != "success" or not log.samples or log.samples[0].error is not None:
        raise RuntimeError(f"{environment.name}: the eval of the score tool did not succeed: {log.error}")
    return [_tool_call_timing(log, environment, event) for event in _score_tool_events(log.samples[0])]


def _score_tool_events(sample: EvalSample) -> list[ToolEvent]:
    return [event for event in sample.events if isinstance(event, ToolEvent) and event.function == "score"]


def _tool_call_timing(log: EvalLog, environment: EnvironmentSpec, event: ToolEvent) -> ToolCall:
    if event.completed is None or event.error is not None:
        raise RuntimeError(f"{environment.name}: a score tool call did not complete: {event.error}")
    runs, others = program_runs(log, environment, within=(event.timestamp, event.completed))
    return ToolCall(_seconds(event.timestamp, event.completed), runs, others)


Row = Any  # one environment's results: a list of ToolCall, or (first Call, timed Calls)


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


def table(columns: list[str], results: dict[str, Row | str], cells: Callable[[Row], list[str]]) -> list[str]:
    """A Markdown table: one row per environment, its `cells`, or the reason it was not run."""
    rows = ["| " + " | ".join(["environment", *columns]) + " |", "| " + " | ".join(["---"] * (len(columns) + 1)) + " |"]
    for name, result in results.items():
        found = [f"not run: {result}", *[""] * (len(columns) - 1)] if isinstance(result, str) else cells(result)
        rows.append("| " + " | ".join([name, *found]) + " |")
    return rows


def _within_target(overhead: list[float]) -> str:
    return "yes" if statistics.median(overhead) <= TARGET_S else "no"


def tool_cells(all_calls: list[ToolCall]) -> list[str]:
    # A call whose scoring program's event the log lacks cannot be split into workload and overhead: left out.
    calls = [call for call in all_calls if call.program_runs]
    if not calls:
        return [f"0 of {len(all_calls)} timed", "", "", "", "", ""]
    overhead = [call.overhead_s for call in calls]
    return [
        f"{len(calls)} of {len(all_calls)}",
        _figure([c.wall_s for c in calls]),
        _figure([sum(c.program_runs) for c in calls]),
        f"**{_figure(overhead)}**",
        _figure([c.harness_commands_s for c in calls]),
        _within_target(overhead),
    ]


TOOL_COLUMNS = [
    "calls timed",
    "`score` tool call, s",
    "scoring program, s",
    "**overhead, s**",
    "of it: harness commands in the sandbox, s",
    "≤ 1 s",
]


def cli_cells(result: tuple[Call, list[Call]]) -> list[str]:
    first, all_calls = result
    # As in tool_cells: a call whose scoring program's event the log lacks is left out (seen on finetune_target's
    # first call, where the program reaches a model through the agent bridge); the first call counts its wall only.
    calls = [call for call in all_calls if call.program_runs]
    if not calls:
        return [f"{first.wall_s:.1f}", f"0 of {len(all_calls)} timed", "", "", "", "", "", ""]
    overhead = [call.overhead_s for call in calls]
    return [
        f"{first.wall_s:.1f}",
        f"{len(calls)} of {len(all_calls)}",
        _figure([c.wall_s for c in calls]),
        f"{_figure([c.program_s for c in calls])} ({len(calls[0].program_runs)})",
        f"**{_figure(overhead)}**",
        _figure([c.before_eval_s for c in calls]),
        _figure([c.harness_commands_s for c in calls]),
        _within_target(overhead),
    ]


CLI_COLUMNS = [
    "first call, s",
    "calls timed",
    "wall, s",
    "scoring program, s (runs per call)",
    "**overhead, s**",
    "of it: before the eval starts, s",
    "of it: harness commands in the sandbox, s",
    "≤ 1 s",
]


def installed_entry_points() -> str:
    return ", ".join(sorted(f"{ep.name} ({ep.value})" for ep in entry_points(group="inspect_ai")))


def report(
    tool_results: dict, cli_results: dict, load: list[float], began: datetime, seconds: float, calls: int
) -> str:
    return "\n".join(
        [
            "# Benchmarks: the harness's overhead per score call",
            "",
            "Regenerate with `python benchmarks/overhead.py` (this file is its output; the method is in its "
            "docstring). Overhead = a call's wall time minus the time its scoring program ran; target: 1 s. "
            "Medians (min–max).",
            "",
            f"- Machine: {machine()}",
            f"- Run: {began:%Y-%m-%d %H:%M} UTC, {seconds / 60:.0f} min, {calls} timed calls per environment each way",
            f"- Load average (1 min) during the run: min {min(load):.1f}, median {statistics.median(load):.1f}, "
            f"max {max(load):.1f} ({len(load)} samples, every {LOAD_SAMPLE_S:g} s)",
            f"- Inspect entry points installed (each command-line call imports them all): {installed_entry_points()}",
            "",
            "## In an eval: the agent's `score` tool (local sandbox)",
            "",
            *table(TOOL_COLUMNS, tool_results, tool_cells),
            "",
            "## On the command line: `rebench score ENV --scale smoke`",
            "",
            "A timed environment's call includes its measured smoke anchors' runs in the workload; the first call "
            "(which may prepare the smoke assets: cold cache) is left out of the overhead figures.",
            "",
            *table(CLI_COLUMNS, cli_results, cli_cells),
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("environments", nargs="*", default=sorted(ENVIRONMENTS), metavar="ENV")
    parser.add_argument("--calls", type=int, default=3, help="timed calls per environment, each way")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "RESULTS.md")
    args = parser.parse_args()
    began, started = datetime.now(UTC), time.monotonic()
    tool_results: dict[str, list[ToolCall] | str] = {}
    cli_results: dict[str, tuple[Call, list[Call]] | str] = {}
    with LoadSampler() as load, tempfile.TemporaryDirectory(prefix="rebench-overhead-evals-") as log_dir:
        for name in args.environments:
            environment = ENVIRONMENTS[name]
            if missing := local_problems(environment):
                tool_results[name] = cli_results[name] = "; ".join(missing).splitlines()[0]
                continue
            first = score_call(environment)  # prepares the smoke assets where the cache has none
            cli_results[name] = (first, [score_call(environment) for _ in range(args.calls)])
            task = TASKS[name](scale="smoke", sandbox="local", time_budget_hours=1)
            tool_results[name] = score_tool_calls(environment, task, args.calls, log_dir)
            print(f"{name}: done", file=sys.stderr)
    text = report(tool_results, cli_results, load.samples, began, time.monotonic() - started, args.calls)
    args.output.write_text(text + hand_kept(args.output))
    print(text)


# RESULTS.md ends in sections kept by hand (dated measurements moved out of the README); a regeneration keeps them.
HAND_KEPT = "<!-- hand-kept below: overhead.py rewrites only what is above this line -->"


def hand_kept(output: Path) -> str:
    """The hand-kept part of the file `output` already holds (from HAND_KEPT on), or nothing."""
    old = output.read_text() if output.is_file() else ""
    return old[old.index(HAND_KEPT) :] if HAND_KEPT in old else ""


if __name__ == "__main__":
    main()
