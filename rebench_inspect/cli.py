"""The `rebench` command: score a workspace outside any eval, run the offline demo, check Docker readiness, report."""

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from inspect_ai import Task
from inspect_ai import eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.log import EvalLog
from inspect_ai.solver import Generate, Solver, TaskState, solver

from rebench.sandbox_lib.paths import cache_root

from .environment import SCALES, EnvironmentSpec, Scale
from .layout import detect_layout
from .normalise import ScoreEntry
from .scoring import SCORER_NAME, anchors_metadata, checked_exec
from .state import rebench_state
from .task import _lay_out_workspace as lay_out_workspace
from .task import build_task

# A cold `rebench demo` on a 2-core machine (README; benchmarks/*_timings.py for the per-environment parts).
COLD_PREPARATION_MINUTES = 10


@solver
def install_workspace(environment: EnvironmentSpec, scale: Scale, workspace: Path | None) -> Solver:
    """Lay out the sample as the environment's setup does (data prepared, protected folder), then put the given
    workspace in place of the starting one (None: score the starting workspace)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        layout = await detect_layout(agent_user=None)
        state_store = rebench_state()
        state_store.layout = layout
        await lay_out_workspace(environment, scale, layout)
        if workspace is not None:
            await checked_exec(["sh", "-c", f'rm -rf "{layout.workspace}" && cp -a "{workspace}" "{layout.workspace}"'])
        state_store.started_at = time.time()
        return state

    return solve


def _last_entry(log: EvalLog) -> ScoreEntry:
    sample = log.samples[0] if log.samples else None
    if log.status != "success" or sample is None or sample.error is not None:
        error = sample.error.message if sample is not None and sample.error else (log.error and log.error.message)
        raise RuntimeError(f"the scoring program failed: {error}")
    final = sample.scores[SCORER_NAME] if sample.scores else None
    if final is None or not final.metadata:
        raise RuntimeError("the eval recorded no score")
    return ScoreEntry.model_validate(final.metadata["score_log"][-1])


def score_workspace(
    environment: EnvironmentSpec,
    workspace: Path | None,
    scale: Scale,
    environment_task: Task | None = None,
    model_roles: dict[str, str] | None = None,
) -> dict:
    """Score a host directory as one scoring run of an eval would (local sandbox): the environment's own scorer,
    with the services it opens around scoring (model proxies at their scale's models; `model_roles` overrides).
    `workspace=None` scores the environment's starting workspace as its setup lays it out."""
    if workspace is not None and not workspace.is_dir():
        raise ValueError(f"{workspace} is not a directory")
    environment_task = environment_task or build_task(environment, scale=scale, sandbox="local", agent_user=None)
    task = Task(
        dataset=[Sample(id=environment.name, input=f"rebench score {environment.name}")],
        solver=install_workspace(environment, scale, workspace.resolve() if workspace else None),
        scorer=environment_task.scorer,
        sandbox="local",
        model_roles={**(environment_task.model_roles or {}), **(model_roles or {})},
        metadata={"environment": environment.name, "scale": scale, "kind": "cli-score"},
    )
    with tempfile.TemporaryDirectory(prefix="rebench-score-") as log_dir:
        [log] = inspect_eval(task, model="none", display="none", log_dir=log_dir)
        entry = _last_entry(log)
    return {
        "environment": environment.name,
        "scale": scale,
        "valid": entry.valid,
        "raw": entry.raw,
        "transformed": entry.transformed,
        "normalised": entry.normalised,
        "message": entry.message,
        "details": entry.details,
        "anchors": anchors_metadata(environment, scale),
    }


def command_score(args: argparse.Namespace) -> int:
    from rebench.environments import TASKS, environment_named

    environment = environment_named(args.environment)
    roles = dict(role.split("=", 1) for role in args.model_role)
    environment_task = TASKS[environment.name](scale=args.scale, sandbox="local", agent_user=None)
    workspace = Path(args.workspace) if args.workspace else None
    result = score_workspace(environment, workspace, args.scale, environment_task, roles)
    print(json.dumps(result, indent=2))
    return 0


def command_demo(args: argparse.Namespace) -> int:
    from inspect_ai import eval

    from rebench.environments import ENVIRONMENTS
    from rebench.maintenance import sandbox_check

    from .sandbox import local_problems

    names = args.environments or list(ENVIRONMENTS)
    say = (lambda _: None) if args.quiet else (lambda text: print(text, flush=True))
    if not cache_root().is_dir() or not any(cache_root().iterdir()):
        say(
            f"First run: preparing the smoke models and data takes about {COLD_PREPARATION_MINUTES} minutes on a "
            f"2-core machine; they are cached in {cache_root()} afterwards."
        )
    # One environment at a time, so the terminal says what is running (a 2-core machine gains nothing in parallel).
    logs = []
    not_run: dict[str, str] = {}  # environments this machine lacks software for: name -> what to install
    for position, name in enumerate(names, start=1):
        if missing := local_problems(ENVIRONMENTS[name]):
            not_run[name] = "; ".join(missing)
            say(f"[{position}/{len(names)}] {name}: not run: {not_run[name]}")
            continue
        say(f"[{position}/{len(names)}] {name}: preparing, then scoring the starting and the reference solution…")
        started = time.monotonic()
        [log] = eval(
            sandbox_check(environment=name, scale="smoke", sandbox="local"),
            model="none",
            log_dir=args.log_dir,
            display="none",
        )
        say(f"[{position}/{len(names)}] {name}: {log.status} in {time.monotonic() - started:.0f} s")
        logs.append(log)
    rows = []
    for log in logs:
        for sample in log.samples or []:
            final = sample.scores.get("rebench_scorer") if sample.scores else None
            meta: dict[str, Any] = (final.metadata or {}) if final else {}
            rows.append(
                (
                    log.eval.task_args.get("environment", "?"),
                    sample.metadata.get("solution", "?"),
                    "error" if sample.error else ("valid" if meta.get("valid") else "invalid"),
                    meta.get("raw"),
                    cast(dict, final.value)["normalised"] if final else None,
                )
            )
    rows.extend((name, "-", "not run", None, None) for name in not_run)
    rows.sort(key=lambda row: (row[0], row[1] != "starting"))
    print(f"\n{'environment':<22}{'solution':<11}{'status':<9}{'raw':>12}{'normalised':>12}")
    for name, solution, status, raw, normalised in rows:
        raw_text = "-" if raw is None else f"{raw:.4g}"
        norm_text = "-" if normalised is None else f"{normalised:.3f}"
        print(f"{name:<22}{solution:<11}{status:<9}{raw_text:>12}{norm_text:>12}")
    for name, reason in not_run.items():
        print(f"\n{name} was not run: {reason}")
    print(f"\nInspect logs in {args.log_dir}: open them with `inspect view --log-dir {args.log_dir}`")
    # An environment asked for by name that could not run is a failure; in the default run over all, a listed gap.
    asked_and_not_run = bool(args.environments) and bool(not_run)
    return 0 if all(log.status == "success" for log in logs) and not asked_and_not_run else 1


def command_preflight(args: argparse.Namespace) -> int:
    from rebench.environments import environment_named

    from .sandbox import docker_problems, local_problems

    environment = environment_named(args.environment)
    if args.sandbox == "local":
        problems, run = local_problems(environment), "local-sandbox run"
    else:
        problems, run = docker_problems(environment, args.scale), "Docker run"
    for problem in problems:
        print(f"- {problem}")
    print(f"ready for a {run}" if not problems else f"{len(problems)} problem(s) for a {run}")
    return 1 if problems else 0


def command_images_build(args: argparse.Namespace) -> int:
    from rebench.environments import environment_named

    from .images import build_image

    for name in args.environments:
        print(f"built {build_image(environment_named(name), args.scale)}")
    return 0


def command_report(args: argparse.Namespace) -> int:
    from .report import make_report

    out = Path(args.out)
    try:
        report = make_report(args.logs, out, max_k=args.max_k, samples=args.bootstrap, seed=args.seed)
    except (ValueError, FileNotFoundError) as ex:
        print(f"rebench report: {ex}", file=sys.stderr)
        return 1
    for warning in report.warnings:
        print(f"warning: {warning}")
    print(f"{len(report.runs)} runs, {len(report.rows)} table rows, {len(report.plots)} plots: {out / 'report.md'}")
    return 0


def command_calibrate(args: argparse.Namespace) -> int:
    from .calibrate import run_calibration

    document = run_calibration(args.environment, args.runs, args.sandbox, args.scale, args.log_dir)
    out = Path(args.out or f"anchors-{args.environment}-{args.scale}.json")
    out.write_text(json.dumps(document, indent=2) + "\n")
    for solution, measured in document["measured"].items():
        print(
            f"{solution:<10} y mean {measured['y_mean']:.4f}  std {measured['y_std']:.4f}  "
            f"({measured['runs']} scoring runs; raw at the mean {measured['raw_at_y_mean']:.6g})"
        )
    on_paper = document["normalised_on_paper_anchors"]
    print(f"on the paper's anchors: start → {on_paper['start']:.3f}, reference → {on_paper['reference']:.3f}")
    if document["replaces_paper_anchors"]:
        print(f"anchors file: {out} (use it with -T anchors={out})")
    else:
        print(f"{args.environment} is not timed: its paper anchors stay; the check is in {out}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rebench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    score = commands.add_parser("score", help="score a workspace directory with the environment's scoring program")
    score.add_argument("environment")
    score.add_argument("workspace", nargs="?", help="default: the environment's starting workspace")
    score.add_argument("--scale", choices=SCALES, default="smoke")
    score.add_argument(
        "--model-role",
        action="append",
        default=[],
        metavar="ROLE=MODEL",
        help="model for a role the environment's services use (e.g. scaffold=openai/gpt-3.5-turbo-0125)",
    )
    score.set_defaults(handler=command_score)

    demo = commands.add_parser("demo", help="offline smoke run of every environment (starting and reference)")
    demo.add_argument("environments", nargs="*", help="default: all implemented environments")
    demo.add_argument("--log-dir", default="logs/demo")
    demo.add_argument("--quiet", action="store_true")
    demo.set_defaults(handler=command_demo)

    preflight = commands.add_parser("preflight", help="say what a Docker (or local) run of an environment is missing")
    preflight.add_argument("environment")
    preflight.add_argument("--scale", choices=SCALES, default="full")
    preflight.add_argument(
        "--sandbox", choices=("docker", "local"), default="docker", help="local: software the host itself needs"
    )
    preflight.set_defaults(handler=command_preflight)

    images = commands.add_parser("images", help="container images").add_subparsers(dest="images", required=True)
    build = images.add_parser("build", help="build environments' images (and their shared base) with a local engine")
    build.add_argument("environments", nargs="+")
    build.add_argument("--scale", choices=SCALES, default="full")
    build.set_defaults(handler=command_images_build)

    report = commands.add_parser("report", help="best-of-k, CIs and score-over-time plots from Inspect logs")
    report.add_argument("logs", nargs="+", help="eval log files or directories (e.g. an eval-set's log dir)")
    report.add_argument("--out", default="rebench-report", help="output folder (default: rebench-report)")
    report.add_argument("--max-k", type=int, default=None, help="largest k of best-of-k (default: most runs)")
    report.add_argument("--bootstrap", type=int, default=2000, help="bootstrap resamples for the CIs")
    report.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (the report is reproducible)")
    report.set_defaults(handler=command_report)

    calibrate = commands.add_parser("calibrate", help="measure start and reference on this hardware: anchors file")
    calibrate.add_argument("environment")
    calibrate.add_argument("--runs", type=int, default=3, help="sandbox-check runs (each scores start and reference)")
    calibrate.add_argument("--sandbox", choices=("docker", "k8s", "local"), default="docker")
    calibrate.add_argument("--scale", choices=SCALES, default="full")
    calibrate.add_argument("--out", default=None, help="anchors file (default: anchors-ENV-SCALE.json)")
    calibrate.add_argument("--log-dir", default="logs/calibrate")
    calibrate.set_defaults(handler=command_calibrate)

    args = parser.parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
