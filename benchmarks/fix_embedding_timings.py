"""Smoke-scale timings of fix_embedding: preparation (cold, into a fresh cache, and warm) and one scoring call.

    python benchmarks/fix_embedding_timings.py [--reference]     # --reference also times reference/solve.sh

Prints one JSON object. Uses a temporary cache directory, so it never touches ~/.cache/rebench.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from timing import machine, time_preparation, time_reference, time_scoring

from rebench.fix_embedding.task import ENVIRONMENT
from rebench_inspect.runtime.staging import stage_tree

TASK = ENVIRONMENT.folder


def score(workspace: Path, protected: Path) -> tuple[float, dict]:
    code = stage_tree(ENVIRONMENT, protected / "code")
    seconds, result = time_scoring(ENVIRONMENT, code, workspace, protected)
    return round(seconds, 2), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", action="store_true", help="also run and score the reference solution")
    args = parser.parse_args()
    report: dict = {"machine": machine(), "date": time.strftime("%Y-%m-%d")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "REBENCH_CACHE_DIR": str(root / "cache")}
        staged = stage_tree(ENVIRONMENT, root / "prepare")
        for label, name in (("prepare_cold_s", ""), ("prepare_cached_s", "2")):
            seconds = time_preparation(ENVIRONMENT, staged, root / f"ws{name}", root / f"p{name}", setup=True, env=env)
            report[label] = round(seconds, 2)
        print(json.dumps(report), file=sys.stderr, flush=True)
        report["score_start_s"], result = score(root / "ws", root / "p")
        report["start_loss"] = result["raw"]
        if args.reference:
            for item in (TASK / "agent" / "workspace").iterdir():
                if item.is_file():
                    shutil.copy2(item, root / "ws" / item.name)
            report["reference_solve_s"] = round(time_reference(ENVIRONMENT, root / "ws", env=env), 2)
            report["score_reference_s"], result = score(root / "ws", root / "p")
            report["reference_loss"] = result["raw"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
