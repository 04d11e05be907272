"""Smoke-scale timings of finetune_target: preparation (cold, then cached), one scoring call, the reference.

    python benchmarks/finetune_target_timings.py [--reference]

Runs everything on the host (CPU) with the offline smoke judge behind a local OpenAI-compatible HTTP endpoint
(no Inspect, no network). Prints one JSON object with seconds and the win rates.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from timing import machine, time_reference, time_scoring

from rebench.finetune_target.smoke_judge import judge_replies
from rebench.finetune_target.task import ENVIRONMENT
from rebench_inspect.testing.fixtures import PreparedAssets, prepare_smoke_assets
from rebench_inspect.testing.model_server import ModelServer
from rebench_inspect.testing.programs import stage_scoring_program


def smoke_judge() -> ModelServer:
    """The offline smoke judge behind a local OpenAI-compatible endpoint; a context manager."""
    return ModelServer(judge_replies)


def score(workspace: Path, protected: Path, judge: ModelServer) -> tuple[float, dict]:
    """Seconds one scoring call took, judged by `judge`, and its result."""
    code = stage_scoring_program(ENVIRONMENT, protected)
    seconds, result = time_scoring(ENVIRONMENT, code, workspace, protected, env={**os.environ, **judge.env})
    return round(seconds, 2), result


def timed_preparation(root: Path) -> tuple[float, PreparedAssets]:
    """Seconds the smoke assets took to prepare in `root` (staging, starting files and the preparation program)."""
    started = time.perf_counter()
    assets = prepare_smoke_assets(ENVIRONMENT, root)
    return round(time.perf_counter() - started, 2), assets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reference", action="store_true", help="also time the reference solution (about a minute)")
    args = parser.parse_args()
    report: dict = {"machine": machine()}
    with tempfile.TemporaryDirectory(prefix="ft-bench-") as tmp:
        root = Path(tmp)
        os.environ.setdefault("REBENCH_CACHE_DIR", str(root / "cache"))
        report["prepare_first_s"], _ = timed_preparation(root / "first")
        report["prepare_cached_s"], assets = timed_preparation(root / "cached")
        workspace, protected = assets.copy_to(root / "run")
        with smoke_judge() as judge:
            report["score_call_s"], result = score(workspace, protected, judge)
            report["start_win_rate"] = result["raw"]
            report["score_details"] = {k: result["details"][k] for k in ("generation_s", "judging_s", "judge_calls")}
            if args.reference:
                report["reference_s"] = round(time_reference(ENVIRONMENT, workspace, env=judge.env), 2)
                report["reference_win_rate"] = score(workspace, protected, judge)[1]["raw"]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
