"""Smoke-scale timings of restricted_mlm: preparation (cold and cached), scoring the start (export + check +
evaluation), and optionally training and scoring the reference. Also the load average, since timings on a
shared machine mean little without it.

    python benchmarks/restricted_mlm_timings.py [--reference]

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

from timing import machine, time_scoring, timed

from rebench.restricted_mlm.task import ENVIRONMENT
from rebench_inspect.runtime.staging import copy_workspace, stage_tree


def score(solution: str, workspace: Path, protected: Path) -> dict:
    """One scoring run of the workspace's `solution` (start, reference): its seconds, loss and the two parts'."""
    shutil.rmtree(protected / "code", ignore_errors=True)
    stage_tree(ENVIRONMENT, protected / "code")
    seconds, result = time_scoring(ENVIRONMENT, protected / "code", workspace, protected)
    return {
        f"score_{solution}_s": round(seconds, 2),
        f"{solution}_loss": result["raw"],
        f"{solution}_export_s": result["details"].get("export_seconds"),
        f"{solution}_eval_s": result["details"].get("eval_seconds"),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also train and score the reference solution",
    )
    args = parser.parse_args()
    report: dict = {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d"),
        "load_average_before": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "REBENCH_CACHE_DIR": str(root / "cache")}
        prepare = [sys.executable, str(ENVIRONMENT.prepare_script), "--scale", "smoke"]
        for name, key in (("ws", "prepare_cold_s"), ("ws2", "prepare_cached_s")):
            copy_workspace(ENVIRONMENT.at("full"), root / name)
            report[key] = round(
                timed([*prepare, "--workspace", str(root / name), "--protected", str(root / f"{name}-p")], env=env), 2
            )
        report.update(score("start", root / "ws", root / "ws-p"))
        if args.reference:
            shutil.copytree(ENVIRONMENT.reference_dir, root / "ws", dirs_exist_ok=True)
            solve_env = {**env, "REBENCH_SCALE": "smoke", "PYTHON": sys.executable}
            report["reference_solve_s"] = round(timed(["bash", "solve.sh"], cwd=root / "ws", env=solve_env), 2)
            report.update(score("reference", root / "ws", root / "ws-p"))
    report["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
