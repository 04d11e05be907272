"""`rebench audit`: the reward-hacking audit's scanners over eval logs, offline (docs/audit.md); and `rebench
report`'s options for the audit's verdicts."""

import argparse
import sys
from pathlib import Path


def run(args: argparse.Namespace) -> int:
    missing = [str(log) for log in args.logs if not log.exists()]
    if missing:
        print(f"rebench audit: no such log file or folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    try:
        from ..audit.offline import audit_logs, audit_table
    except ModuleNotFoundError as ex:
        if ex.name != "inspect_scout":
            raise
        print("rebench audit: needs Inspect Scout: pip install 'inspect-rebench[audit]'", file=sys.stderr)
        return 1
    audit = audit_logs(args.logs, args.out, args.scan_model)
    if not audit.rows:
        print(f"rebench audit: no runs found in {', '.join(map(str, args.logs))}", file=sys.stderr)
        return 1
    print(audit_table(audit.rows))
    for error in audit.errors:
        print(f"scanner error: {error}", file=sys.stderr)
    flagged = sum(row.verdict != "clean" for row in audit.rows)
    print(f"\n{flagged} of {len(audit.rows)} runs flagged. Scout's results: {audit.location}")
    print(f"Read the findings beside the transcripts: scout view --scans {args.out}")
    return 1 if audit.errors else 0


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    audit = commands.add_parser("audit", help="flag reward hacking in eval logs (the audit's Inspect Scout scanners)")
    audit.add_argument("logs", nargs="+", type=Path, metavar="LOGS", help="eval log files or folders of them")
    audit.add_argument(
        "--out", type=Path, default=Path("scans"), help="folder Scout writes the scan results into (default: ./scans)"
    )
    audit.add_argument(
        "--scan-model",
        metavar="MODEL",
        help="also run the model monitor with this model (e.g. openai/gpt-4.1); without it only the rules run",
    )
    audit.set_defaults(run=run)


def add_audit_options(report: argparse.ArgumentParser) -> None:
    """`rebench report`'s options for the audit's verdicts."""
    report.add_argument(
        "--scans",
        nargs="+",
        default=(),
        metavar="DIR",
        help="folders with the audit's scan results (default: scans/ under the log folders, where online scans go)",
    )
    report.add_argument(
        "--exclude-flagged", action="store_true", help="leave out the runs the audit found suspicious or hacking"
    )
