"""Evaluate `solution.py` on the development problems, the way the scorer does (but this copy is yours).

    python validate.py [--problems data/dev_problems.json] [--limit N] [--module solution] [--public-only]

It runs your module in its own process (rust_eval/generate_runner.py), then compiles every returned program as the
scorer does (`rustc --edition 2018`, no `-O`) and runs it on the public, private and generated tests
(rust_eval/rust_evaluator.py), and prints each problem's outcome and the fraction solved. The model endpoint
and its key come from $OPENAI_BASE_URL / $REBENCH_PROXY_KEY, or else from the `model_api.env` file the harness
writes into this folder. Editing rust_eval/ changes nothing about your score:
the scorer uses its own copy of this code.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "rust_eval"))

import rust_evaluator  # noqa: E402

DEV_FIELDS_HIDDEN_FROM_MODULE = ("private_tests", "generated_tests")


def model_env() -> dict[str, str]:
    env = dict(os.environ)
    env_file = HERE / "model_api.env"
    if "OPENAI_BASE_URL" not in env and env_file.exists():
        for line in env_file.read_text().splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith("#"):
                env.setdefault(key, value)
    env.setdefault("OPENAI_API_KEY", "rebench-proxy")
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, default=HERE / "data" / "dev_problems.json")
    parser.add_argument("--limit", type=int, default=None, help="only the first N problems")
    parser.add_argument("--module", default="solution")
    parser.add_argument("--public-only", action="store_true", help="judge on public tests only")
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--batch-timeout", type=float, default=60.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--json", type=Path, default=None, help="also write per-problem results here")
    parser.add_argument("--scale", choices=sorted(rust_evaluator.LIMITS), default="full",
                        help="the scorer's limits at this scale (smoke allows slower compiles)")
    args = parser.parse_args()

    problems = json.loads(args.problems.read_text())[: args.limit]
    with tempfile.TemporaryDirectory(prefix="validate-") as tmp:
        shown = [{k: v for k, v in p.items() if k not in DEV_FIELDS_HIDDEN_FROM_MODULE} for p in problems]
        (Path(tmp) / "problems.json").write_text(json.dumps(shown))
        out = Path(tmp) / "results.json"
        started = time.monotonic()
        total_timeout = args.batch_timeout * (len(problems) // max(1, args.batch_size) + 1)
        cmd = [
            sys.executable, str(HERE / "rust_eval" / "generate_runner.py"), "--module-dir", str(HERE),
            "--module", args.module, "--problems", str(Path(tmp) / "problems.json"), "--out", str(out),
            "--batch-size", str(args.batch_size), "--batch-timeout", str(args.batch_timeout),
            "--total-timeout", str(total_timeout), "--concurrency", str(args.concurrency),
        ]
        try:
            subprocess.run(cmd, cwd=HERE, env=model_env(), timeout=total_timeout + 30, start_new_session=True)
        except subprocess.TimeoutExpired:
            print("the module did not finish in time", file=sys.stderr)
        payload = json.loads(out.read_text()) if out.exists() else {}
        print(f"generation took {time.monotonic() - started:.1f}s")
    if payload.get("import_error"):
        print(f"could not import {args.module}.py: {payload['import_error']}", file=sys.stderr)
        return 1
    results = payload.get("results", {})
    sources = {n: r.get("source") if isinstance(r.get("source"), str) else None for n, r in results.items()}
    errors = {n: str(r.get("error", "")) for n, r in results.items()}
    kinds = ("public_tests",) if args.public_only else rust_evaluator.TEST_KINDS
    limits = rust_evaluator.LIMITS[args.scale]
    verdicts = rust_evaluator.judge_all(problems, sources, errors, kinds=kinds, limits=limits)
    for v in verdicts:
        extra = f" ({v.failed_test}: {v.detail.strip()[:160]})" if not v.solved else ""
        print(f"{v.name:40s} {v.outcome:16s} {v.tests_passed}/{v.tests_total}{extra}")
    summary = rust_evaluator.summarise(verdicts)
    print(f"solved {summary['solved']}/{summary['total']} = {summary['fraction']:.3f} "
          f"(± {summary['stderr']:.3f}); outcomes {summary['outcomes']}")
    if args.json:
        args.json.write_text(json.dumps({"summary": summary, "problems": [v.to_dict() for v in verdicts]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
