"""Smoke-scale timings of scaling_law: preparation, one scoring call, one capped experiment, the reference sweep.

    python benchmarks/scaling_law_timings.py [--reference]     # --reference also times reference/solve.sh

Stages the preparation and scoring folders with the host's own staging into a temporary directory and prints one
JSON object (seconds, plus the scores of the default and reference answers).
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
from pathlib import Path

from timing import machine, time_preparation, time_reference, time_scoring, timed

from rebench.scaling_law.task import ENVIRONMENT
from rebench_inspect.runtime.staging import stage_tree


def score(workspace: Path, protected: Path, code: Path) -> tuple[float, dict]:
    seconds, result = time_scoring(ENVIRONMENT, code, workspace, protected)
    return round(seconds, 2), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true")
    args = parser.parse_args()
    report: dict = {
        "machine": machine(),
        "python": platform.python_version(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace, protected = root / "workspace", root / "protected"
        prepare_dir = stage_tree(ENVIRONMENT, root / "prepare")
        scoring = stage_tree(ENVIRONMENT, protected / "code")
        report["prepare_s"] = round(time_preparation(ENVIRONMENT, prepare_dir, workspace, protected, setup=False), 2)
        report["score_s"], report["default_answer"] = score(workspace, protected, scoring)
        config = workspace / "bench_config.py"
        config.write_text("n_embd = 16\nmax_iters = 100\n")
        report["experiment_16x100_s"] = round(timed([sys.executable, "train.py", config.name], cwd=workspace), 2)
        if args.reference:
            report["reference_s"] = round(time_reference(ENVIRONMENT, workspace), 2)
            report["reference_answer"] = json.loads((workspace / "answer.json").read_text())
            _, report["reference_score"] = score(workspace, protected, scoring)
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
