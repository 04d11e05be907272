"""`rebench calibrate`: measure the starting and the reference solution on this hardware into an anchors file."""

import argparse
import json
from pathlib import Path

from ..spec.scales import SCALES
from .arguments import add_environment, positive_int


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    calibrate = commands.add_parser("calibrate", help="measure start and reference on this hardware: anchors file")
    add_environment(calibrate)
    calibrate.add_argument(
        "--runs", type=positive_int, default=3, help="sandbox-check runs (each scores start and reference)"
    )
    calibrate.add_argument("--sandbox", choices=("docker", "k8s", "local"), default="docker")
    calibrate.add_argument("--scale", choices=SCALES, default="full")
    calibrate.add_argument("--out", default=None, help="anchors file (default: anchors-ENV-SCALE.json)")
    calibrate.add_argument("--log-dir", default="logs/calibrate")
    calibrate.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rebench.environments import ENVIRONMENTS

    from ..tools.calibrate import run_calibration

    document = run_calibration(args.environment, args.runs, args.sandbox, args.scale, args.log_dir)
    out = Path(args.out or f"anchors-{args.environment}-{args.scale}.json")
    out.write_text(json.dumps(document, indent=2) + "\n")
    for solution, measured in document["measured"].items():
        print(
            f"{solution:<10} y mean {measured['y_mean']:.4f}  std {measured['y_std']:.4f}  "
            f"({measured['runs']} scoring runs; raw at the mean {measured['raw_at_y_mean']:.6g})"
        )
    on_built_in = document["normalised_on_built_in_anchors"]
    # The built-in anchors are the paper's at full scale only; at smoke scale they were measured on a CPU.
    built_in = "the paper's anchors" if args.scale == "full" else "the built-in smoke anchors (CPU-measured)"
    print(f"on {built_in}: start → {on_built_in['start']:.3f}, reference → {on_built_in['reference']:.3f}")
    if document["replaces_built_in_anchors"]:
        print(f"anchors file: {out} (use it with -T anchors={out})")
    else:
        print(f"{args.environment} is not timed: {built_in} stay in use; the check is in {out}")
    note = ENVIRONMENTS[args.environment].calibration_note
    if note:
        print(note.format(logical_cpus=document.get("hardware", {}).get("logical_cpus", "unknown")))
    return 0
