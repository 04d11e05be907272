"""Smoke-scale timings of optimize_llm_foundry on this machine: scoring runs of the starting and the reference
solution, each split into the script's own time (the score) and the scoring program's fixed overhead (copying the
solution and the model, reading and comparing the weights, the process sweep); the first run's one-off reference
training is reported apart. The geometric means of the scores are what the smoke anchors in task.py record.

    python benchmarks/optimize_llm_foundry_timings.py [-n RUNS]

Needs the LLM Foundry stack (sandboxes/optimize_llm_foundry/install_llm_foundry.sh). Prints one JSON object, with the
load average: timings on a shared machine mean little without it. Uses a temporary cache directory.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rebench.optimize_llm_foundry.task import ENVIRONMENT
from rebench_inspect.runtime.staging import copy_workspace, prepare_command, scoring_command, stage_tree


def timed(command: list[str], **kwargs) -> float:
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, text=True, **kwargs)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=3, help="scoring runs per solution")
    args = parser.parse_args()
    report: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "load_average_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="foundry-timings-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "REBENCH_CACHE_DIR": str(root / "cache")}
        workspace = copy_workspace(ENVIRONMENT.at("smoke"), root / "start")
        protected = root / "protected"
        prepare_dir = stage_tree(ENVIRONMENT, root / "prepare")
        command, cwd = prepare_command(
            ENVIRONMENT.at("smoke"),
            python=sys.executable,
            code_dir=prepare_dir,
            workspace=workspace,
            protected=protected,
            setup=True,
        )
        report["prepare_cold_s"] = round(timed(command, cwd=cwd, env=env), 2)
        reference = root / "reference"
        shutil.copytree(workspace, reference, symlinks=True)
        shutil.copytree(ENVIRONMENT.reference_dir / "solution", reference / "solution", dirs_exist_ok=True)
        code_dir = stage_tree(ENVIRONMENT, root / "code")
        for name, candidate in (("start", workspace), ("reference", reference)):
            runs = []
            for _ in range(args.runs):
                result = root / "result.json"
                command, cwd = scoring_command(
                    ENVIRONMENT.at("smoke"),
                    python=sys.executable,
                    code_dir=code_dir,
                    workspace=candidate,
                    protected=protected,
                    result=result,
                )
                total = timed(command, cwd=cwd, env=env)
                outcome = json.loads(result.read_text())
                assert outcome["valid"], outcome["message"]
                details = outcome["details"]
                one_off = details.get("reference_seconds")
                overhead = total - outcome["raw"] - (one_off or 0.0)
                runs.append(
                    {
                        "score_s": round(outcome["raw"], 2),
                        "overhead_s": round(overhead, 2),
                        **({"reference_training_s": one_off} if one_off else {}),
                    }
                )
            scores = [run["score_s"] for run in runs]
            report[name] = {
                "runs": runs,
                "geometric_mean_score_s": round(math.exp(sum(map(math.log, scores)) / len(scores)), 2),
            }
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
