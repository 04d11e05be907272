"""`rebench report`: best-of-k, confidence intervals and score-over-time plots from Inspect logs."""

import argparse
import sys
from pathlib import Path

from .arguments import positive_int
from .audit import add_audit_options


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    report = commands.add_parser("report", help="best-of-k, CIs and score-over-time plots from Inspect logs")
    report.add_argument("logs", nargs="+", help="eval log files or directories (e.g. an eval-set's log dir)")
    report.add_argument("--out", default="rebench-report", help="output folder (default: rebench-report)")
    report.add_argument("--max-k", type=positive_int, default=None, help="largest k of best-of-k (default: most runs)")
    report.add_argument("--bootstrap", type=positive_int, default=2000, help="bootstrap resamples for the CIs")
    report.add_argument("--seed", type=int, default=0, help="seed of the bootstrap (the report is reproducible)")
    add_audit_options(report)
    report.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from ..tools.report import make_report

    out = Path(args.out)
    try:
        report = make_report(
            args.logs,
            out,
            max_k=args.max_k,
            samples=args.bootstrap,
            seed=args.seed,
            scans=args.scans,
            exclude_flagged=args.exclude_flagged,
        )
    except (ValueError, FileNotFoundError) as ex:
        print(f"rebench report: {ex}", file=sys.stderr)
        return 1
    for warning in report.warnings:
        print(f"warning: {warning}")
    print(f"{len(report.runs)} runs, {len(report.rows)} table rows, {len(report.plots)} plots: {out / 'report.md'}")
    return 0
