"""Reference solution of scaling_law (after the paper's B.4.5): an iso-FLOP grid of capped experiments, a fit,
an extrapolation to the target budget, written to answer.json.

Every experiment goes through the workspace's `train.py` launcher, like an agent's: budgets at the cap and 1/2,
1/4 of it (the paper's reference used four); at each budget n_embd on a 1.5× geometric grid (multiples of n_head) with max_iters spending the
budget. For each budget a parabola in ln(n_embd) through the losses gives the best n_embd and loss; straight
lines in ln(budget) then extrapolate both to the target. Diverged or too-short runs are left out.

The grid does not depend on any result, so its runs go at once where the trainer leaves cores free: at smoke scale it
trains on one CPU thread per run (one run per CPU); at full scale one run at a time (one GPU, as in the paper).
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

BUDGET_FRACTIONS = (1.0, 0.5, 0.25)
GROWTH = 1.5
MIN_ITERS = 10
SIZES_PER_BUDGET = 6
RUNS_AT_ONCE = {"smoke": os.cpu_count() or 1, "full": 1}


def read_settings() -> dict:
    """The cap, target, constants and the fixed n_head, from the trainer the launcher points at."""
    launcher = Path("train.py").read_text()
    found = re.search(r'TRAINER_DIR = Path\("(.+)"\)', launcher)
    if found is None:
        raise SystemExit("train.py does not name the trainer's folder")
    trainer_dir = Path(found.group(1))
    sys.path.insert(0, str(trainer_dir))
    from scaling_common import SETTINGS

    scale = json.loads((trainer_dir / "trainer_settings.json").read_text())["scale"]
    return {"scale": scale, "settings": SETTINGS[scale]}


def run(n_embd: int, max_iters: int) -> float | None:
    config = Path(f"ref_n{n_embd}_i{max_iters}.py")
    config.write_text(f"n_embd = {n_embd}\nmax_iters = {max_iters}\n")
    completed = subprocess.run(
        [sys.executable, "train.py", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    result = [
        line for line in completed.stdout.splitlines() if line.startswith("RESULT ")
    ]
    print(
        completed.stdout.splitlines()[-3]
        if completed.stdout
        else completed.stderr[-300:],
        flush=True,
    )
    if completed.returncode != 0 or not result:
        return None
    return float(json.loads(result[-1].removeprefix("RESULT "))["val_loss"])


def best_of_budget(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(best n_embd, its loss) from a parabola in ln(n_embd), clamped to the measured range."""
    x = np.log([n for n, _ in points])
    y = np.array([loss for _, loss in points])
    a, b, c = np.polyfit(x, y, 2)
    if a <= 0:  # no curvature: take the best measured point
        k = int(np.argmin(y))
        return float(math.exp(x[k])), float(y[k])
    x_best = float(np.clip(-b / (2 * a), x.min(), x.max()))
    return math.exp(x_best), float(np.polyval([a, b, c], x_best))


def planned_runs(settings) -> dict[float, list[tuple[int, int]]]:
    """Per budget, its experiments (n_embd, max_iters): widths from n_head up on the geometric grid, each with the
    iterations that spend the budget, while at least MIN_ITERS of them fit."""
    step_flops = settings.flops(1, 1)  # FLOPs per step per n_embd²
    grid: dict[float, list[tuple[int, int]]] = {}
    for fraction in BUDGET_FRACTIONS:
        budget = settings.experiment_cap * fraction
        runs = grid[budget] = []
        n = settings.n_head
        while len(runs) < SIZES_PER_BUDGET:
            max_iters = int(budget // (step_flops * n * n))
            if max_iters < MIN_ITERS:
                break
            runs.append((n, max_iters))
            n = max(
                n + settings.n_head,
                round(n * GROWTH / settings.n_head) * settings.n_head,
            )
    return grid


def main() -> None:
    found = read_settings()
    settings = found["settings"]
    step_flops = settings.flops(1, 1)
    grid = planned_runs(settings)
    with ThreadPoolExecutor(max_workers=RUNS_AT_ONCE[found["scale"]]) as pool:
        pending = {budget: [pool.submit(run, n, max_iters) for n, max_iters in runs] for budget, runs in grid.items()}
    losses = {budget: [future.result() for future in futures] for budget, futures in pending.items()}
    optima = []
    for budget, runs in grid.items():
        points = [
            (n, loss)
            for (n, _), loss in zip(runs, losses[budget])
            if loss is not None and loss < math.log(1e6)
        ]
        if len(points) >= 3:
            n_best, loss_best = best_of_budget(points)
            optima.append((budget, n_best, loss_best))
            print(
                f"budget {budget:.3g}: best n_embd {n_best:.1f}, loss {loss_best:.4f}",
                flush=True,
            )
    budgets = np.log([b for b, _, _ in optima])
    slope_n, intercept_n = np.polyfit(budgets, np.log([n for _, n, _ in optima]), 1)
    slope_l, intercept_l = np.polyfit(budgets, [loss for _, _, loss in optima], 1)
    target = math.log(settings.target_flops)
    n_embd = math.exp(intercept_n + slope_n * target)
    loss = intercept_l + slope_l * target
    # The answer must be a width the trainer runs: the multiple of n_head nearest the prediction, with max_iters
    # spending the target budget at that width.
    n_embd = max(1, round(n_embd / settings.n_head)) * settings.n_head
    max_iters = round(settings.target_flops / (step_flops * n_embd * n_embd))
    answer = {
        "n_embd": n_embd,
        "max_iters": max_iters,
        "loss_prediction": round(float(loss), 4),
    }
    Path("answer.json").write_text(json.dumps(answer, indent=2) + "\n")
    print("answer:", answer)


if __name__ == "__main__":
    main()
