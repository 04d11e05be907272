"""`rebench report`: the paper's analysis (docs/benchmark.md) on a user's own Inspect logs.

Reads eval logs (an `eval-set` directory or files; any mix of environments, models, epochs and budgets), turns every
sample into one run, and writes per-environment tables (mean normalised score with a bootstrap CI), best-of-k curves
(the paper's method), score-over-time plots and plain warnings, as Markdown, CSV, JSON and PNG. Every number names
the runs (log file, sample id, epoch) it comes from.

The statistics are pure functions on `Run` records, so they can be tested on synthetic data with known answers.
"""

import csv
import json
import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..runtime.measured_anchors import MEASURED_AT_SETUP
from ..runtime.scoring import SCORER_NAME, SCORING_FAILURE

if TYPE_CHECKING:  # Inspect's log types and matplotlib load lazily: the report's statistics need neither
    from inspect_ai.log import EvalLog
    from matplotlib.axes import Axes

HUMAN_GROUP = "human"
# Solvers whose runs are a human's (Inspect's human agent; `human_agent` is its deprecated name).
HUMAN_SOLVERS = ("human_cli", "human_agent")
CONFIDENCE = 0.95
DEFAULT_BOOTSTRAP_SAMPLES = 2000

# The paper's published human aggregates (docs/benchmark.md): reference marks at full scale, H100 hardware.
PAPER_HUMAN_REFERENCE: list[dict[str, Any]] = [
    {
        "label": "paper humans, mean at 8 h",
        "hours": 8.0,
        "normalised": 0.64,
        "provenance": "RE-Bench paper (arXiv 2411.15114): 71 eight-hour attempts by 61 experts, full scale, H100",
    },
    {
        "label": "paper humans (professional network), mean at 8 h",
        "hours": 8.0,
        "normalised": 0.98,
        "provenance": "RE-Bench paper (arXiv 2411.15114), by recruitment source",
    },
    {
        "label": "paper humans (hiring applicants), mean at 8 h",
        "hours": 8.0,
        "normalised": 0.48,
        "provenance": "RE-Bench paper (arXiv 2411.15114), by recruitment source",
    },
]


@dataclass(frozen=True)
class TimePoint:
    """One score-log entry: working time (s) and the entry's normalised score (None when invalid)."""

    time_s: float
    normalised: float | None


@dataclass
class Run:
    """One sample of one eval log: a single attempt at one environment."""

    source: str  # "<log file>#<sample id>@<epoch>"
    log_file: str
    sample_id: str
    epoch: int
    environment: str
    group: str  # the model's name, or "human" for human_cli runs
    scale: str
    time_budget_hours: float
    normalised: float | None  # the final score; None when the run has no final score (errored)
    valid: bool  # the final score came from a valid entry
    final_rule: str = "best"
    anchors: str = ""  # which anchors normalised it: provenance and raw values
    ended_by: str = "agent"  # "agent" (submitted), "budget", another limit's name, or "error"
    error: str | None = None
    # The final scoring run failed on the agent's files (a scorer bug its data set off): an invalid entry.
    scoring_failure: bool = False
    timeline: list[TimePoint] = field(default_factory=list)
    time_from_wall_clock: bool = False  # no working times were recorded: wall times used instead
    audit: str = ""  # the reward-hacking audit's verdict (clean, suspicious, hacking); "" where not audited

    @property
    def counted(self) -> bool:
        """Runs that enter the statistics: scored and not cut short by an error."""
        return self.normalised is not None and self.ended_by != "error"


# ---------------------------------------------------------------- reading logs


def _anchors_label(anchors: dict) -> str:
    # The scale first: full-scale built-in anchors are the paper's, smoke ones were measured on a CPU.
    if str(anchors.get("provenance", "")).startswith(MEASURED_AT_SETUP):
        return f"{anchors.get('scale', '?')} scale: {MEASURED_AT_SETUP} (each run on its own machine)"
    raw = f"start {anchors.get('raw_start')}, reference {anchors.get('raw_reference')}"
    return f"{anchors.get('scale', '?')} scale: {anchors.get('provenance', '?')} ({raw})"


def _group(log: "EvalLog") -> str:
    solver = (log.eval.solver or "").rsplit("/", 1)[-1]
    return HUMAN_GROUP if solver in HUMAN_SOLVERS else log.eval.model


def runs_from_log(log: "EvalLog", log_file: str) -> list[Run]:
    runs = []
    for sample in log.samples or []:
        metadata = sample.metadata or {}
        final = (sample.scores or {}).get(SCORER_NAME)
        final_meta = (final.metadata or {}) if final is not None else {}
        entries = final_meta.get("score_log", [])
        use_wall = bool(entries) and all(entry.get("working_time_s") is None for entry in entries)
        timeline = [
            TimePoint(
                time_s=float(entry["wall_time_s"] if use_wall else entry.get("working_time_s") or 0.0),
                normalised=entry.get("normalised") if entry.get("valid") else None,
            )
            for entry in entries
        ]
        finals = [entry for entry in entries if entry.get("label") == "final"]
        # True, or the exception's name in logs written before verdicts used a fixed vocabulary.
        scoring_failure = bool(finals and (finals[-1].get("details") or {}).get(SCORING_FAILURE))
        if sample.error is not None:
            ended_by = "error"
        elif sample.limit is not None:
            ended_by = "budget" if sample.limit.type in ("working", "time") else sample.limit.type
        else:
            ended_by = "agent"
        runs.append(
            Run(
                source=f"{log_file}#{sample.id}@{sample.epoch}",
                log_file=log_file,
                sample_id=str(sample.id),
                epoch=sample.epoch,
                environment=str(final_meta.get("environment") or metadata.get("environment") or sample.id),
                group=_group(log),
                scale=str(metadata.get("scale") or log.eval.task_args.get("scale", "?")),
                time_budget_hours=float(
                    metadata.get("time_budget_hours") or log.eval.task_args.get("time_budget_hours") or math.nan
                ),
                normalised=None if final is None else float(final_meta.get("normalised", 0.0)),
                valid=bool(final_meta.get("valid", False)),
                final_rule=str(final_meta.get("final_rule", "best")),
                anchors=_anchors_label(final_meta.get("anchors", {})) if final is not None else "",
                ended_by=ended_by,
                error=None if sample.error is None else sample.error.message,
                scoring_failure=scoring_failure,
                timeline=timeline,
                time_from_wall_clock=use_wall,
            )
        )
    return runs


def log_files(paths: Iterable[str | Path]) -> list[Path]:
    """Eval log files named directly or found (recursively) in directories, e.g. an eval-set's log dir."""
    found: list[Path] = []
    for path in map(Path, paths):
        if path.is_dir():
            found += sorted(p for p in path.rglob("*") if p.suffix in (".eval", ".json") and _is_eval_log(p))
        elif path.exists():
            found.append(path)
        else:
            raise FileNotFoundError(f"no such log file or directory: {path}")
    return found


def _is_eval_log(path: Path) -> bool:
    # eval-set directories also hold logs.json and eval-set.json, which are not eval logs.
    # Scout's scan results (`scans/scan_id=…/_scan.json`, written beside the logs by `--scanner`) are not either.
    if path.name.startswith("_"):
        return False
    return path.suffix == ".eval" or path.name not in ("logs.json", "eval-set.json", "listing.json")


def read_runs(paths: Iterable[str | Path]) -> list[Run]:
    """Every run in the logs; a task retried by `eval-set` counts once (its latest log wins)."""
    from inspect_ai.log import read_eval_log

    by_task: dict[str, tuple[str, list[Run]]] = {}
    for path in log_files(paths):
        log = read_eval_log(str(path))
        if (log.eval.metadata or {}).get("kind") == "maintenance":
            continue  # sandbox checks and calibrations install solutions: they are not attempts
        runs = runs_from_log(log, str(path))
        previous = by_task.get(log.eval.task_id)
        if previous is None or previous[0] <= log.eval.created:
            by_task[log.eval.task_id] = (log.eval.created, runs)
    return [run for _, runs in by_task.values() for run in runs]


def no_runs_message(paths: Sequence[str | Path]) -> str:
    """Why there is nothing to report, and which logs a report needs, in one sentence."""
    from inspect_ai.log import read_eval_log

    named = ", ".join(map(str, paths))
    files = log_files(paths)
    checks = sum(
        (read_eval_log(str(path), header_only=True).eval.metadata or {}).get("kind") == "maintenance" for path in files
    )
    needed = "a report needs the logs of agent runs (`inspect eval rebench/ENV --model MODEL --log-dir DIR`)"
    if files and checks == len(files):
        return (
            f"{named} holds only sandbox-check logs ({checks}, as `rebench demo` and `rebench calibrate` write them), "
            f"which score the starting solution and install the reference instead of running an agent: {needed}"
        )
    return f"no agent runs in {named}: {needed}"


# ---------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile, q in [0, 1]."""
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def expected_best_of_k(scores: Sequence[float], k: int, random_run: bool = False) -> float:
    """E[max of k runs drawn with replacement] from these scores, exactly; `random_run`: the mean (Scaling Law).

    With sorted scores x(1) ≤ … ≤ x(n), the max of k draws is x(i) with probability (i/n)^k − ((i−1)/n)^k.
    """
    if random_run:
        # The agent cannot see its score, so it cannot pick its best run: a random one counts (docs/benchmark.md).
        return sum(scores) / len(scores)
    ordered, n = sorted(scores), len(scores)
    return sum(x * ((i / n) ** k - ((i - 1) / n) ** k) for i, x in enumerate(ordered, start=1))


def bootstrap_mean_ci(scores: Sequence[float], samples: int, rng: random.Random) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean."""
    n = len(scores)
    means = [sum(rng.choices(scores, k=n)) / n for _ in range(samples)]
    alpha = (1 - CONFIDENCE) / 2
    return percentile(means, alpha), percentile(means, 1 - alpha)


@dataclass
class BestOfK:
    k: int
    estimate: float
    ci_low: float
    ci_high: float
    environments: list[str]
    short_environments: list[str]  # fewer runs than k


def best_of_k_curve(
    scores_by_environment: dict[str, list[float]],
    random_run_environments: set[str],
    max_k: int,
    samples: int,
    rng: random.Random,
) -> list[BestOfK]:
    """The paper's best-of-k (docs/benchmark.md): per environment the expected max of k runs drawn with replacement,
    averaged over environments; 95% CI by percentile bootstrap, resampling each environment's runs."""
    names = sorted(scores_by_environment)
    resampled = [
        {name: rng.choices(scores_by_environment[name], k=len(scores_by_environment[name])) for name in names}
        for _ in range(samples)
    ]
    curve = []
    for k in range(1, max_k + 1):

        def average(per_env: dict[str, list[float]], k: int = k) -> float:
            return sum(expected_best_of_k(per_env[n], k, n in random_run_environments) for n in names) / len(names)

        replicates = [average(sample) for sample in resampled]
        alpha = (1 - CONFIDENCE) / 2
        curve.append(
            BestOfK(
                k=k,
                estimate=average(scores_by_environment),
                ci_low=percentile(replicates, alpha),
                ci_high=percentile(replicates, 1 - alpha),
                environments=names,
                short_environments=[n for n in names if len(scores_by_environment[n]) < k],
            )
        )
    return curve


def best_so_far(run: Run, times_s: Sequence[float]) -> list[float]:
    """The run's score at each time: best valid entry so far (last valid for a `last` rule), 0 before any."""
    values = []
    for t in times_s:
        seen = [point.normalised for point in run.timeline if point.time_s <= t and point.normalised is not None]
        if not seen:
            values.append(0.0)
        else:
            values.append(seen[-1] if run.final_rule == "last" else max(seen))
    return values


# ---------------------------------------------------------------- the report


@dataclass
class Row:
    """One environment × group × scale × budget × anchors: the per-environment table."""

    environment: str
    group: str
    scale: str
    time_budget_hours: float
    anchors: str
    runs: int
    mean_normalised: float
    ci_low: float
    ci_high: float
    invalid_only_runs: int
    scoring_failures: int  # runs whose final scoring failed on the agent's files (counted as invalid)
    sources: list[str]


@dataclass
class Cohort:
    """One group × scale × budget across environments: the best-of-k curve and the score over time."""

    group: str
    scale: str
    time_budget_hours: float
    environments: list[str]
    best_of_k: list[BestOfK]
    sources: list[str]


@dataclass
class Report:
    rows: list[Row]
    cohorts: list[Cohort]
    runs: list[Run]
    warnings: list[str]
    plots: list[str] = field(default_factory=list)
    paper_human_reference: list[dict] = field(default_factory=lambda: PAPER_HUMAN_REFERENCE)


def _budget_text(hours: float) -> str:
    return f"{hours:g} h"


def analyse(
    runs: list[Run], max_k: int | None = None, samples: int = DEFAULT_BOOTSTRAP_SAMPLES, seed: int = 0
) -> Report:
    rng = random.Random(seed)
    warnings: list[str] = []
    for run in runs:
        if run.ended_by == "error":
            warnings.append(f"{run.source}: cut short by an error, not the budget; left out ({run.error})")
        elif not run.valid:
            warnings.append(f"{run.source}: no valid score in its score log; counted as normalised 0")
        if run.scoring_failure and run.ended_by != "error":
            warnings.append(f"{run.source}: the final scoring failed on the agent's files; counted as an invalid entry")
        if run.time_from_wall_clock:
            warnings.append(f"{run.source}: no working times recorded; its score over time uses wall-clock time")
    counted = [run for run in runs if run.counted]

    by_row: dict[tuple, list[Run]] = defaultdict(list)
    for run in counted:
        by_row[(run.environment, run.group, run.scale, run.time_budget_hours, run.anchors)].append(run)
    rows = []
    for (environment, group, scale, hours, anchors), members in sorted(by_row.items()):
        scores = [run.normalised or 0.0 for run in members]
        low, high = bootstrap_mean_ci(scores, samples, rng)
        rows.append(
            Row(
                environment,
                group,
                scale,
                hours,
                anchors,
                len(members),
                sum(scores) / len(scores),
                low,
                high,
                sum(not run.valid for run in members),
                sum(run.scoring_failure for run in members),
                [run.source for run in members],
            )
        )

    by_cohort: dict[tuple, list[Run]] = defaultdict(list)
    for run in counted:
        by_cohort[(run.group, run.scale, run.time_budget_hours)].append(run)
    cohorts = []
    for (group, scale, hours), members in sorted(by_cohort.items()):
        label = f"{group}, {scale}, {_budget_text(hours)}"
        per_environment: dict[str, list[Run]] = defaultdict(list)
        for run in members:
            per_environment[run.environment].append(run)
        usable: dict[str, list[Run]] = {}
        for environment, env_runs in sorted(per_environment.items()):
            anchor_sets = sorted({run.anchors for run in env_runs})
            if len(anchor_sets) > 1:
                # Normalised scores under different anchors are different scales: never average them silently.
                warnings.append(
                    f"{label}: {environment} was scored with different anchors ({'; '.join(anchor_sets)}); "
                    "left out of best-of-k (each anchor set has its own row in the table)"
                )
            else:
                usable[environment] = env_runs
        if not usable:
            continue
        k_max = max_k or max(len(env_runs) for env_runs in usable.values())
        for environment, env_runs in usable.items():
            if len(env_runs) < k_max:
                warnings.append(
                    f"{label}: {environment} has {len(env_runs)} run(s), fewer than k = {k_max}; "
                    "its best-of-k beyond that reuses the same runs"
                )
        random_run = {name for name, env_runs in usable.items() if env_runs[0].final_rule == "last"}
        curve = best_of_k_curve(
            {name: [run.normalised or 0.0 for run in env_runs] for name, env_runs in usable.items()},
            random_run,
            k_max,
            samples,
            rng,
        )
        sources = [run.source for env_runs in usable.values() for run in env_runs]
        cohorts.append(Cohort(group, scale, hours, sorted(usable), curve, sources))

    scales = {run.scale for run in counted}
    if len(scales) > 1:
        warnings.append(f"runs at several scales ({', '.join(sorted(scales))}): they are reported apart, never mixed")
    return Report(rows=rows, cohorts=cohorts, runs=runs, warnings=warnings)


# ---------------------------------------------------------------- writing


def _time_grid(runs: Sequence[Run], points: int = 200) -> list[float]:
    # To the end of the longest budget: a run's best score so far holds after its last scoring run.
    budgets = [run.time_budget_hours * 3600 for run in runs if math.isfinite(run.time_budget_hours)]
    end = max([point.time_s for run in runs for point in run.timeline] + budgets, default=0.0)
    return [end * i / (points - 1) for i in range(points)] if end > 0 else [0.0]


def write_plots(report: Report, out: Path) -> list[str]:
    """Best-so-far normalised score against working time: one PNG per environment and one averaged over them."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    counted = [run for run in report.runs if run.counted]
    written = []
    plot_dir = out / "plots"
    plot_dir.mkdir(parents=True, exist_ok=True)
    environments = sorted({run.environment for run in counted})
    averaged: dict[tuple, list[list[float]]] = defaultdict(list)
    grid = _time_grid(counted)
    # Smoke runs last minutes, full ones hours.
    unit, unit_s = ("hours", 3600.0) if grid[-1] >= 3600 else ("minutes", 60.0)
    hours = [t / unit_s for t in grid]
    for environment in environments:
        figure, axes = plt.subplots(figsize=(7, 4.5))
        env_runs = [run for run in counted if run.environment == environment]
        by_cohort: dict[tuple, list[Run]] = defaultdict(list)
        for run in env_runs:
            by_cohort[(run.group, run.scale, run.time_budget_hours)].append(run)
        for (group, scale, budget), members in sorted(by_cohort.items()):
            curves = [best_so_far(run, grid) for run in members]
            mean_curve = [sum(values) / len(values) for values in zip(*curves, strict=True)]
            averaged[(group, scale, budget)].append(mean_curve)
            style = "--" if group == HUMAN_GROUP else "-"
            axes.plot(hours, mean_curve, style, label=f"{group} ({scale}, {_budget_text(budget)}, {len(members)} runs)")
        _finish_axes(axes, f"{environment}: best score so far (mean over runs)", unit)
        figure.tight_layout()
        figure.savefig(plot_dir / f"{environment}.png", dpi=100)
        plt.close(figure)
        written.append(f"plots/{environment}.png")
    figure, axes = plt.subplots(figsize=(7, 4.5))
    for (group, scale, budget), curves in sorted(averaged.items()):
        mean_curve = [sum(values) / len(values) for values in zip(*curves, strict=True)]
        style = "--" if group == HUMAN_GROUP else "-"
        axes.plot(hours, mean_curve, style, label=f"{group} ({scale}, {_budget_text(budget)}, {len(curves)} envs)")
    # The paper's humans worked at full scale: their marks mean nothing beside smoke runs.
    marks = PAPER_HUMAN_REFERENCE if any(scale == "full" for _, scale, _ in averaged) else []
    for mark in marks:
        axes.plot(
            [float(mark["hours"]) * 3600 / unit_s],
            [float(mark["normalised"])],
            marker="*",
            markersize=10,
            linestyle="none",
            label=mark["label"],
        )
    reference_note = "paper humans: full scale, H100" if marks else "no paper marks: smoke scale"
    _finish_axes(axes, f"Average over environments: best score so far ({reference_note})", unit)
    figure.tight_layout()
    figure.savefig(plot_dir / "average.png", dpi=100)
    plt.close(figure)
    written.append("plots/average.png")
    return written


def _finish_axes(axes: "Axes", title: str, unit: str) -> None:
    axes.set_xlabel(f"working time ({unit})")
    axes.set_ylabel("normalised score (start 0, reference 1)")
    axes.set_title(title, fontsize=10)
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:  # no runs counted: an empty plot, no legend
        axes.legend(fontsize=7)


def _fmt(value: float) -> str:
    return f"{value:.3f}"


# runs.csv: one column per attribute of a Run, under its name.
RUNS_CSV_COLUMNS = (
    "log_file",
    "sample_id",
    "epoch",
    "environment",
    "group",
    "scale",
    "time_budget_hours",
    "normalised",
    "valid",
    "ended_by",
    "anchors",
    "counted",
    "audit",
)


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(header)
        writer.writerows(rows)


def write_report(report: Report, out: Path) -> None:
    """report.md, report.json, runs.csv, environments.csv, best_of_k.csv (plots are written by `write_plots`)."""
    out.mkdir(parents=True, exist_ok=True)
    _write_csv(
        out / "runs.csv",
        RUNS_CSV_COLUMNS,
        ([getattr(run, column) for column in RUNS_CSV_COLUMNS] for run in report.runs),
    )
    _write_csv(
        out / "environments.csv",
        [
            "environment",
            "group",
            "scale",
            "time_budget_hours",
            "runs",
            "mean_normalised",
            "ci95_low",
            "ci95_high",
            "invalid_only_runs",
            "scoring_failures",
            "anchors",
            "sources",
        ],
        (
            [
                row.environment,
                row.group,
                row.scale,
                row.time_budget_hours,
                row.runs,
                row.mean_normalised,
                row.ci_low,
                row.ci_high,
                row.invalid_only_runs,
                row.scoring_failures,
                row.anchors,
                " ".join(row.sources),
            ]
            for row in report.rows
        ),
    )
    _write_csv(
        out / "best_of_k.csv",
        [
            "group",
            "scale",
            "time_budget_hours",
            "k",
            "estimate",
            "ci95_low",
            "ci95_high",
            "environments",
            "environments_with_fewer_runs_than_k",
        ],
        (
            [
                cohort.group,
                cohort.scale,
                cohort.time_budget_hours,
                point.k,
                point.estimate,
                point.ci_low,
                point.ci_high,
                " ".join(point.environments),
                " ".join(point.short_environments),
            ]
            for cohort in report.cohorts
            for point in cohort.best_of_k
        ),
    )
    (out / "report.json").write_text(json.dumps(asdict(report), indent=2, default=str))
    (out / "report.md").write_text(markdown(report))


def markdown(report: Report) -> str:
    lines = ["# rebench report", ""]
    lines += ["## Warnings", ""] + ([f"- {w}" for w in report.warnings] or ["none"]) + [""]
    lines += [
        "## Per environment",
        "",
        "Mean normalised score of the runs (start 0, reference 1) with a 95% percentile-bootstrap CI.",
        "",
        "| environment | group | scale | budget | runs | mean | 95% CI | invalid-only | scorer failed on files | "
        "anchors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in report.rows:
        lines.append(
            f"| {row.environment} | {row.group} | {row.scale} | {_budget_text(row.time_budget_hours)} | {row.runs} | "
            f"{_fmt(row.mean_normalised)} | [{_fmt(row.ci_low)}, {_fmt(row.ci_high)}] | {row.invalid_only_runs} | "
            f"{row.scoring_failures} | {row.anchors} |"
        )
    lines += [
        "",
        "## Best-of-k",
        "",
        (
            "Paper's method (docs/benchmark.md): per environment the expected best of k runs drawn with "
            "replacement (Scaling Law: a random run), averaged over environments; 95% CI by percentile bootstrap over "
            "each environment's runs."
        ),
        "",
    ]
    for cohort in report.cohorts:
        lines += [
            (
                f"### {cohort.group}, {cohort.scale}, {_budget_text(cohort.time_budget_hours)} "
                f"({len(cohort.environments)} environments: {', '.join(cohort.environments)})"
            ),
            "",
            "| k | total budget (k × run) | best-of-k | 95% CI |",
            "|---|---|---|---|",
        ]
        lines += [
            f"| {p.k} | {_budget_text(p.k * cohort.time_budget_hours)} | {_fmt(p.estimate)} | "
            f"[{_fmt(p.ci_low)}, {_fmt(p.ci_high)}] |"
            for p in cohort.best_of_k
        ]
        lines.append("")
    lines += ["## Paper's human reference (full scale, H100)", ""]
    lines += [f"- {m['label']}: {m['normalised']} ({m['provenance']})" for m in report.paper_human_reference]
    lines += ["", "## Plots", ""] + ([f"![{p}]({p})" for p in report.plots] or ["none (pip install matplotlib)"])
    lines += [
        "",
        "## Runs",
        "",
        "| run (log file#sample@epoch) | environment | group | normalised | valid | ended by | audit |",
    ]
    lines.append("|---|---|---|---|---|---|---|")
    for run in report.runs:
        score = "-" if run.normalised is None else _fmt(run.normalised)
        audit = run.audit or "-"
        lines.append(
            f"| {run.source} | {run.environment} | {run.group} | {score} | {run.valid} | {run.ended_by} | {audit} |"
        )
    return "\n".join(lines) + "\n"


def _with_audit_verdicts(
    runs: list[Run], scan_folders: list[Path], exclude_flagged: bool
) -> tuple[list[Run], list[str]]:
    """The runs with the audit's verdicts (Scout is imported only where scan results exist), less the flagged ones
    if asked; and a warning per run left out, with a count."""
    from ..audit.offline import audit_verdicts, scan_locations

    if not scan_locations(scan_folders):
        if exclude_flagged:
            raise ValueError(
                "--exclude-flagged: no audit results found (run `rebench audit LOGS --out DIR`, then pass --scans DIR)"
            )
        return runs, []
    verdicts = audit_verdicts(scan_folders)
    for run in runs:
        row = verdicts.get((Path(run.log_file).name, run.sample_id, run.epoch))
        run.audit = row.verdict if row is not None else "not audited"
    if not exclude_flagged:
        return runs, []
    flagged = [run for run in runs if run.audit in ("suspicious", "hacking")]
    warnings = [
        f"{run.source}: left out, the audit found it {run.audit} "
        f"({', '.join(verdicts[(Path(run.log_file).name, run.sample_id, run.epoch)].rules_fired)})"
        for run in flagged
    ]
    warnings.append(f"{len(flagged)} of {len(runs)} runs left out as flagged by the audit (--exclude-flagged)")
    return [run for run in runs if run not in flagged], warnings


def make_report(
    paths: Sequence[str | Path],
    out: Path,
    max_k: int | None = None,
    samples: int = DEFAULT_BOOTSTRAP_SAMPLES,
    seed: int = 0,
    scans: Sequence[str | Path] = (),
    exclude_flagged: bool = False,
) -> Report:
    """`scans`: folders holding the audit's scan results (default: those under the log folders, where online scans
    go); with them each run shows its verdict, and `exclude_flagged` leaves the flagged runs out."""
    runs = read_runs(paths)
    if not runs:
        raise ValueError(no_runs_message(paths))
    runs, left_out = _with_audit_verdicts(runs, [Path(p) for p in scans or paths if Path(p).is_dir()], exclude_flagged)
    report = analyse(runs, max_k=max_k, samples=samples, seed=seed)
    report.warnings += left_out
    try:
        report.plots = write_plots(report, out)
    except ImportError:
        report.warnings.append("no plots: matplotlib is missing (pip install matplotlib)")
    write_report(report, out)
    return report
