"""Smoke-scale timings of scaling_law: preparation, one scoring call, one capped experiment, the reference sweep.

    python benchmarks/scaling_law_timings.py [--reference]     # --reference also times reference/solve.sh

Stages the preparation and scoring folders with the host's own staging into a temporary directory and prints one
JSON object (seconds, plus the scores of the default and reference answers).
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

from rebench.scaling_law.task import ENVIRONMENT
from rebench_inspect.runtime.staging import prepare_command, scoring_command, stage_tree


def timed(cmd: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    started = time.perf_counter()
    completed = subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)
    return round(time.perf_counter() - started, 2), completed


def score(workspace: Path, protected: Path, code: Path) -> tuple[float, dict]:
    result = protected / "result.json"
    command, cwd = scoring_command(
        ENVIRONMENT.at("smoke"),
        python=sys.executable,
        code_dir=code,
        workspace=workspace,
        protected=protected,
        result=result,
    )
    seconds, _ = timed(command, cwd=cwd)
    return seconds, json.loads(result.read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true")
    args = parser.parse_args()
    report: dict = {
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        workspace, protected = root / "workspace", root / "protected"
        prepare_dir = stage_tree(ENVIRONMENT, root / "prepare")
        scoring = stage_tree(ENVIRONMENT, protected / "code")
        command, cwd = prepare_command(
            ENVIRONMENT.at("smoke"),
            python=sys.executable,
            code_dir=prepare_dir,
            workspace=workspace,
            protected=protected,
            setup=False,
        )
        report["prepare_s"], _ = timed(command, cwd=cwd)
        report["score_s"], report["default_answer"] = score(workspace, protected, scoring)
        config = workspace / "bench_config.py"
        config.write_text("n_embd = 16\nmax_iters = 100\n")
        report["experiment_16x100_s"], _ = timed([sys.executable, "train.py", config.name], cwd=workspace)
        if args.reference:
            for item in ENVIRONMENT.reference_dir.iterdir():
                shutil.copy2(item, workspace / item.name)
            env = {**os.environ, "PYTHON": sys.executable}
            report["reference_s"], _ = timed(["bash", "solve.sh"], cwd=workspace, env=env)
            report["reference_answer"] = json.loads((workspace / "answer.json").read_text())
            _, report["reference_score"] = score(workspace, protected, scoring)
    print(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
