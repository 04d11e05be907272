"""docs/running.md's battery use, run exactly: one `inspect eval-set` over environments, then `rebench report` on its logs.

Smoke scale, local sandbox, `--model none` with the reference solver. It runs the cheapest environment(s) only
(BATTERY): the others' cold smoke preparation trains models for minutes on a 2-core machine.
"""

import csv
import math
import os
import subprocess
import sys
from pathlib import Path

from inspect_ai.log import list_eval_logs, read_eval_log

from rebench_inspect.cli import main

BATTERY = ("optimize_kernel",)
EPOCHS = 2


def test_eval_set_then_report_matches_the_logs(tmp_path):
    logs, out = tmp_path / "logs", tmp_path / "report"
    inspect = Path(sys.executable).parent / "inspect"
    command = [
        str(inspect), "eval-set", *(f"rebench/{name}" for name in BATTERY), "--log-dir", str(logs),
        "--model", "none", "--solver", "rebench/reference_solution", "-T", "scale=smoke", "-T", "sandbox=local",
        "--epochs", str(EPOCHS), "--display", "none",
    ]  # fmt: skip
    process = subprocess.run(command, capture_output=True, text=True, timeout=1800, env=os.environ, check=False)
    assert process.returncode == 0, process.stdout[-3000:] + process.stderr[-3000:]
    assert main(["report", str(logs), "--out", str(out), "--bootstrap", "200"]) == 0

    # the report's numbers, recomputed by hand from the logs
    finals: dict[str, list[float]] = {}
    for info in list_eval_logs(str(logs)):
        log = read_eval_log(info)
        for sample in log.samples:
            finals.setdefault(sample.metadata["environment"], []).append(
                sample.scores["rebench_scorer"].metadata["normalised"]
            )
    assert sorted(finals) == sorted(BATTERY) and all(len(scores) == EPOCHS for scores in finals.values())
    with open(out / "environments.csv") as handle:
        rows = {row["environment"]: row for row in csv.DictReader(handle)}
    for name, scores in finals.items():
        assert rows[name]["group"] == "none/none" and int(rows[name]["runs"]) == EPOCHS
        assert math.isclose(float(rows[name]["mean_normalised"]), sum(scores) / EPOCHS)
    with open(out / "best_of_k.csv") as handle:
        best = list(csv.DictReader(handle))
    assert [int(row["k"]) for row in best] == list(range(1, EPOCHS + 1))
    best_of_1 = sum(sum(scores) / len(scores) for scores in finals.values()) / len(finals)
    assert math.isclose(float(best[0]["estimate"]), best_of_1)
    # with two runs, best of 2 = max − (max − min)/4 (both draws the worse run with probability 1/4)
    assert math.isclose(
        float(best[1]["estimate"]),
        sum(max(s) - (max(s) - min(s)) / 4 for s in finals.values()) / len(finals),
    )
    assert (out / "plots" / "average.png").read_bytes().startswith(b"\x89PNG")
