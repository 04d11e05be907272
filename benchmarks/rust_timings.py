"""Smoke-scale timings of rust_codecontests: compile and run time per problem, and whole scoring runs.

    python benchmarks/rust_timings.py [--no-scoring]

1. For each of the ten smoke problems, judges the offline model's correct (or near-miss) program with the real
   evaluator at smoke limits: unoptimised `rustc --edition 2018` compile seconds (the original's command), and
   seconds to run all of its tests (each test its own process).
2. Unless --no-scoring: scores the starting and the reference scaffold with the real scoring program (the
   offline model behind a local fake OpenAI endpoint), reporting generation, judging and total seconds.

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

from rebench.rust_codecontests.sandbox import rust_evaluator
from rebench.rust_codecontests.smoke_model import NEAR_MISSES, SOLUTIONS, smoke_answers
from rebench.rust_codecontests.task import ENVIRONMENT
from rebench_inspect.testing.fixtures import prepare_smoke_assets
from rebench_inspect.testing.model_server import ModelServer
from rebench_inspect.testing.programs import scoring_result

TASK = ENVIRONMENT.folder


def per_problem() -> list[dict]:
    problems = json.loads((TASK / "sandbox" / "smoke_problems.json").read_text())
    rows = []
    for problem in problems:
        source = SOLUTIONS.get(problem["title"]) or NEAR_MISSES[problem["title"]]
        started = time.perf_counter()
        verdict = rust_evaluator.judge(problem, source, limits=rust_evaluator.LIMITS["smoke"])
        rows.append(
            {
                "problem": problem["name"],
                "split": problem["split"],
                "program": "correct" if problem["title"] in SOLUTIONS else "near miss",
                "outcome": verdict.outcome,
                "tests": verdict.tests_total,
                "compile_s": verdict.compile_s,
                "run_all_tests_s": verdict.run_s,
                "total_s": round(time.perf_counter() - started, 3),
            }
        )
    return rows


def scoring_runs() -> dict:
    out = {}
    # The offline scaffold model behind a key, every answer recorded, as the harness's scoring proxy serves it.
    with (
        tempfile.TemporaryDirectory(prefix="rust-timings-") as tmp,
        ModelServer(smoke_answers, keyed=True, record=True) as server,
    ):
        assets = prepare_smoke_assets(ENVIRONMENT, Path(tmp) / "assets")
        for name, solution in (("start", TASK / "agent" / "workspace"), ("reference", TASK / "reference")):
            workspace, protected = assets.copy_to(Path(tmp) / name)
            (workspace / "solution.py").write_text((solution / "solution.py").read_text())
            started = time.perf_counter()
            result = scoring_result(ENVIRONMENT, workspace, protected, env={**os.environ, **server.env})
            out[name] = {
                "raw": result["raw"],
                "generation_s": result["details"]["generation_s"],
                "judging_s": result["details"]["judging_s"],
                "programs_from_model": result["details"]["programs_from_model"],
                "total_s": round(time.perf_counter() - started, 2),
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-scoring", action="store_true")
    args = parser.parse_args()
    rows = per_problem()
    report = {
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "rustc": os.popen("rustc --version").read().strip(),
            "load_average": os.getloadavg(),
        },
        "per_problem": rows,
        "compile_s_mean": round(sum(r["compile_s"] for r in rows) / len(rows), 3),
        "run_all_tests_s_mean": round(sum(r["run_all_tests_s"] for r in rows) / len(rows), 3),
    }
    if not args.no_scoring:
        report["scoring"] = scoring_runs()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
