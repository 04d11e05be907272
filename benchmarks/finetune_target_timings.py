"""Smoke-scale timings of finetune_target: preparation (cold, then cached), one scoring call, the reference.

    python benchmarks/finetune_target_timings.py [--reference]

Runs everything on the host (CPU) with the offline smoke judge behind a local OpenAI-compatible HTTP endpoint
(no Inspect, no network). Prints one JSON object with seconds and the win rates.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.finetune_target.conftest import TASK, FakeJudge, fresh_copy, run_prepare, score  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="store_true", help="also time the reference solution (about a minute)")
    args = parser.parse_args()
    timings: dict = {}
    with tempfile.TemporaryDirectory(prefix="ft-bench-") as tmp:
        root = Path(tmp)
        os.environ.setdefault("REBENCH_CACHE_DIR", str(root / "cache"))
        (root / "assets" / "workspace").mkdir(parents=True)
        for label in ("prepare_first_s", "prepare_cached_s"):
            started = time.time()
            completed = run_prepare(root / "assets" / "workspace", root / "assets" / "protected")
            assert completed.returncode == 0, completed.stderr[-2000:]
            timings[label] = round(time.time() - started, 2)
            shutil.rmtree(root / "assets" / "protected")
            (root / "assets" / "workspace").mkdir(exist_ok=True)
        run_prepare(root / "assets" / "workspace", root / "assets" / "protected")
        workspace, protected = fresh_copy(root / "assets", root / "run")
        judge = FakeJudge()
        try:
            started = time.time()
            result = score(workspace, protected, judge.env)
            timings["score_call_s"] = round(time.time() - started, 2)
            timings["start_win_rate"] = result["raw"]
            timings["score_details"] = {k: result["details"][k] for k in ("generation_s", "judging_s", "judge_calls")}
            if args.reference:
                for item in (TASK / "reference").iterdir():
                    shutil.copy2(item, workspace / item.name)
                started = time.time()
                subprocess.run(
                    ["bash", "solve.sh"],
                    cwd=workspace,
                    check=True,
                    capture_output=True,
                    env={**os.environ, **judge.env, "PYTHON": sys.executable},
                )
                timings["reference_s"] = round(time.time() - started, 2)
                timings["reference_win_rate"] = score(workspace, protected, judge.env)["raw"]
        finally:
            judge.close()
    print(json.dumps(timings, indent=2))


if __name__ == "__main__":
    main()
