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
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rebench.restricted_mlm.task import ENVIRONMENT
from rebench_inspect.runtime.staging import copy_workspace, scoring_command, stage_tree


def run(cmd: list[str], **kwargs) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)
    return round(time.perf_counter() - started, 2)


def score(workspace: Path, protected: Path) -> tuple[float, dict]:
    shutil.rmtree(protected / "code", ignore_errors=True)
    stage_tree(ENVIRONMENT, protected / "code")
    result = protected / "result.json"
    command, cwd = scoring_command(
        ENVIRONMENT.at("smoke"),
        python=sys.executable,
        code_dir=protected / "code",
        workspace=workspace,
        protected=protected,
        result=result,
    )
    seconds = run(command, cwd=cwd)
    return seconds, json.loads(result.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--reference",
        action="store_true",
        help="also train and score the reference solution",
    )
    args = parser.parse_args()
    report: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "date": time.strftime("%Y-%m-%d"),
        "load_average_before": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "REBENCH_CACHE_DIR": str(root / "cache")}
        prepare = [sys.executable, str(ENVIRONMENT.prepare_script), "--scale", "smoke"]
        for name, key in (("ws", "prepare_cold_s"), ("ws2", "prepare_cached_s")):
            copy_workspace(ENVIRONMENT.at("full"), root / name)
            report[key] = run(
                [
                    *prepare,
                    "--workspace",
                    str(root / name),
                    "--protected",
                    str(root / f"{name}-p"),
                ],
                env=env,
            )
        seconds, result = score(root / "ws", root / "ws-p")
        report.update(
            score_start_s=seconds,
            start_loss=result["raw"],
            start_export_s=result["details"].get("export_seconds"),
            start_eval_s=result["details"].get("eval_seconds"),
        )
        if args.reference:
            shutil.copytree(ENVIRONMENT.reference_dir, root / "ws", dirs_exist_ok=True)
            report["reference_solve_s"] = run(
                ["bash", "solve.sh"],
                cwd=root / "ws",
                env={**env, "REBENCH_SCALE": "smoke", "PYTHON": sys.executable},
            )
            seconds, result = score(root / "ws", root / "ws-p")
            report.update(
                score_reference_s=seconds,
                reference_loss=result["raw"],
                reference_export_s=result["details"].get("export_seconds"),
                reference_eval_s=result["details"].get("eval_seconds"),
            )
    report["load_average_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
