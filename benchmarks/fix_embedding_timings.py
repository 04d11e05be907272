"""Smoke-scale timings of fix_embedding: preparation (cold, into a fresh cache, and warm) and one scoring call.

    python benchmarks/fix_embedding_timings.py [--reference]     # --reference also times reference/solve.sh

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

from rebench.fix_embedding.task import ENVIRONMENT
from rebench_inspect.runtime.staging import prepare_command, scoring_command, stage_tree

TASK = ENVIRONMENT.folder


def run(cmd: list[str], **kwargs) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, text=True, **kwargs)
    return round(time.perf_counter() - started, 2)


def score(workspace: Path, protected: Path) -> tuple[float, dict]:
    code = stage_tree(ENVIRONMENT, protected / "code")
    result = protected / "result.json"
    command, cwd = scoring_command(
        ENVIRONMENT.at("smoke"),
        python=sys.executable,
        code_dir=code,
        workspace=workspace,
        protected=protected,
        result=result,
    )
    seconds = run(command, cwd=cwd)
    return seconds, json.loads(result.read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reference", action="store_true", help="also run and score the reference solution")
    args = parser.parse_args()
    report: dict = {"machine": f"{platform.machine()}, {os.cpu_count()} CPUs", "date": time.strftime("%Y-%m-%d")}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        env = {**os.environ, "REBENCH_CACHE_DIR": str(root / "cache")}
        staged = stage_tree(ENVIRONMENT, root / "prepare")

        def prepare(name: str) -> tuple[list[str], str]:
            return prepare_command(
                ENVIRONMENT.at("smoke"),
                python=sys.executable,
                code_dir=staged,
                workspace=root / f"ws{name}",
                protected=root / f"p{name}",
                setup=True,
            )

        for label, name in (("prepare_cold_s", ""), ("prepare_cached_s", "2")):
            command, cwd = prepare(name)
            report[label] = run(command, env=env, cwd=cwd)
        print(json.dumps(report), file=sys.stderr, flush=True)
        report["score_start_s"], result = score(root / "ws", root / "p")
        report["start_loss"] = result["raw"]
        if args.reference:
            for item in [*(TASK / "agent" / "workspace").iterdir(), *(TASK / "reference").iterdir()]:
                if item.is_file():
                    shutil.copy2(item, root / "ws" / item.name)
            report["reference_solve_s"] = run(["bash", "solve.sh"], cwd=root / "ws",
                                              env={**env, "REBENCH_SCALE": "smoke", "PYTHON": sys.executable})
            report["score_reference_s"], result = score(root / "ws", root / "p")
            report["reference_loss"] = result["raw"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
