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
import shutil
import tempfile
from pathlib import Path

from timing import machine, time_preparation, time_scoring

from rebench.optimize_llm_foundry.task import ENVIRONMENT
from rebench_inspect.runtime.staging import copy_workspace, stage_tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--runs", type=int, default=3, help="scoring runs per solution")
    args = parser.parse_args()
    report: dict = {
        "machine": machine(),
        "load_average_before": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="foundry-timings-") as tmp:
        root = Path(tmp)
        env = {**os.environ, "REBENCH_CACHE_DIR": str(root / "cache")}
        workspace = copy_workspace(ENVIRONMENT.at("smoke"), root / "start")
        protected = root / "protected"
        prepare_dir = stage_tree(ENVIRONMENT, root / "prepare")
        prepare_seconds = time_preparation(ENVIRONMENT, prepare_dir, workspace, protected, setup=True, env=env)
        report["prepare_cold_s"] = round(prepare_seconds, 2)
        reference = root / "reference"
        shutil.copytree(workspace, reference, symlinks=True)
        shutil.copytree(ENVIRONMENT.reference_dir / "solution", reference / "solution", dirs_exist_ok=True)
        code_dir = stage_tree(ENVIRONMENT, root / "code")
        for name, candidate in (("start", workspace), ("reference", reference)):
            runs = []
            for _ in range(args.runs):
                total, outcome = time_scoring(ENVIRONMENT, code_dir, candidate, protected, env=env)
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
