"""Overhead and noise of the optimize_kernel scoring program.

Scores one solution N times with the real scoring program (staged as the host stages it) and prints:
- the scorer's own overhead: wall time of a whole scoring run minus the time spent in the timed calls;
- the spread of the transformed score ln(ms) across runs (std, min, max).

With --overhead it instead times N calls of a no-op `prefix_sum` (returns a preallocated tensor) through the
scoring program's own protocol (freeze, clock, resume, "returned" signal, freeze): the fixed cost every timed
call carries. The no-op's output is accepted by replacing the reference in this process only.

    python benchmarks/kernel_scoring_noise.py [--solution PATH] [-n N] [--scale smoke|full] [--overhead]
"""

import argparse
import math
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from timing import time_scoring

from rebench.optimize_kernel.task import ENVIRONMENT
from rebench_inspect.runtime.staging import stage_tree

ROOT = Path(__file__).resolve().parents[1]
TASK = ROOT / "tasks" / "optimize_kernel"


def score_once(solution: Path, scale: str) -> tuple[dict, float]:
    with tempfile.TemporaryDirectory(prefix="rebench-kernel-bench-") as tmp:
        workspace, protected = Path(tmp) / "workspace", Path(tmp) / "protected"
        workspace.mkdir()
        shutil.copy2(solution, workspace / "solution.py")
        code = stage_tree(ENVIRONMENT, protected / "code")  # the scoring program staged as the host stages it
        wall, result = time_scoring(ENVIRONMENT, code, workspace, protected, scale=scale)
        return result, wall


NOOP_SOLUTION = """
import torch

_outputs = {}


def prefix_sum(x):
    if x.numel() not in _outputs:
        _outputs[x.numel()] = torch.zeros_like(x)
    return _outputs[x.numel()]
"""


def timed_call_overhead(scale: str, calls: int) -> list[float]:
    """Wall times (ms) of `calls` timed calls of a no-op solution, with the scorer's own Worker and call()."""
    import numpy as np

    from rebench.optimize_kernel.sandbox import kernel_common as kc
    from rebench.optimize_kernel.sandbox import score
    from rebench.sandbox_lib import become_subreaper

    kc.reference = np.zeros_like  # the no-op returns zeros: accept them, so that only the protocol is timed
    become_subreaper()
    settings = kc.SCALES[scale]
    with tempfile.TemporaryDirectory(prefix="rebench-kernel-noop-") as tmp:
        workspace, work = Path(tmp) / "workspace", Path(tmp) / "work"
        workspace.mkdir()
        work.mkdir()
        (workspace / "solution.py").write_text(NOOP_SOLUTION)
        worker = score.Worker(workspace, scale, None, settings, work)
        try:
            worker.import_solution()
            for _ in range(settings["warmups"]):
                score.call(worker, settings, settings["n"], "warm-up")
            return [score.call(worker, settings, settings["n"], "timed")[0] for _ in range(calls)]
        finally:
            worker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--solution", type=Path, default=TASK / "agent" / "workspace" / "solution.py")
    parser.add_argument("-n", type=int, default=10, help="number of scoring runs (default 10)")
    parser.add_argument("--scale", choices=["smoke", "full"], default="smoke")
    parser.add_argument("--overhead", action="store_true", help="time timed calls of a no-op solution instead")
    args = parser.parse_args()

    if args.overhead:
        times = timed_call_overhead(args.scale, args.n)
        print(
            f"no-op timed call, scale {args.scale}, {args.n} calls: median {statistics.median(times):.3f} ms  "
            f"min {min(times):.3f} ms  max {max(times):.3f} ms"
        )
        return

    logs, overheads = [], []
    print(f"solution: {args.solution}  scale: {args.scale}  runs: {args.n}")
    for i in range(args.n):
        result, wall = score_once(args.solution, args.scale)
        if not result["valid"]:
            sys.exit(f"run {i + 1}: invalid: {result['message']}")
        timed_s = sum(result["details"]["trials_ms"]) / 1e3
        overheads.append(wall - timed_s)
        logs.append(math.log(result["raw"]))
        print(
            f"run {i + 1:2d}: raw {result['raw']:9.3f} ms  ln {logs[-1]:7.4f}  "
            f"scoring wall {wall:6.2f} s  overhead {overheads[-1]:6.2f} s"
        )
    std = statistics.stdev(logs) if len(logs) > 1 else 0.0
    print(
        f"n={result['details']['n']} on_gpu={result['details']['on_gpu']} trials/run="
        f"{len(result['details']['trials_ms'])}"
    )
    print(
        f"ln(ms): mean {statistics.fmean(logs):.4f}  std {std:.4f}  min {min(logs):.4f}  max {max(logs):.4f}  "
        f"(median raw {math.exp(statistics.median(logs)):.3f} ms)"
    )
    print(
        f"scorer overhead per run: mean {statistics.fmean(overheads):.2f} s  min {min(overheads):.2f} s  "
        f"max {max(overheads):.2f} s"
    )


if __name__ == "__main__":
    main()
