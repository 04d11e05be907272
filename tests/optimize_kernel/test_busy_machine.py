"""Issue 23: smoke timings that hold on a busy machine. The fixed smoke anchors were measured once on an idle
machine; with every core kept busy a scoring run takes several times as long, and the reference, scored against
those anchors, fell to 0. Measured at the sample's setup under the same load, the anchors keep the start near 0
and the reference near 1 (one timed run under this load varies about twofold, so the test asks for at least 0.5)."""

import os
import subprocess
import sys
from collections.abc import Iterator

import pytest
from inspect_ai import eval

from rebench.maintenance import reference_solution
from rebench.optimize_kernel.task import optimize_kernel
from rebench_inspect.runtime.measured_anchors import MEASURED_AT_SETUP

# Slow tier (`pytest -m slow`, run by CI): a whole smoke eval on a machine kept busy (8 scoring runs, each slowed).
# Timed: alone on the host, so the load is the spinners' alone, the same at setup and at scoring.
pytestmark = [pytest.mark.slow, pytest.mark.timed]

# Spinning processes per core: each scoring run gets a small share of a core, as on the shared machines where the
# fixed anchors put the reference at 0 (load average 15-34 on 2 cores).
SPINNERS_PER_CORE = 4


@pytest.fixture
def every_core_busy() -> Iterator[None]:
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"])
        for _ in range(SPINNERS_PER_CORE * (os.cpu_count() or 2))
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def test_a_busy_machine_still_sees_the_reference_well_above_a_low_start(every_core_busy):
    # One sample: setup measures the anchors and scores the starting solution (the log's first entry), then the
    # reference solver installs the reference, which the final entry scores.
    task = optimize_kernel(scale="smoke", sandbox="local", agent_user=None, time_budget_hours=0.5)
    [log] = eval(task, solver=reference_solution(), model="none", display="none", log_dir=None)
    assert log.status == "success", log.error
    final = log.samples[0].scores["rebench_scorer"]
    assert final.metadata["anchors"]["provenance"].startswith(MEASURED_AT_SETUP), final.metadata["anchors"]
    start, reference = final.metadata["score_log"][0], final.metadata["score_log"][-1]
    assert (start["label"], reference["label"]) == ("start", "final")
    assert start["valid"] and reference["valid"], (start, reference)
    # The scores a report shows (clipped to [0, 1]): the reference well above the start, which stays low. One busy
    # run measured start 53-68 ms and reference 8-11 ms at setup (idle: 15.9 and 2.0, the fixed anchors then), then
    # scored the start at 37 ms (0.27) and the reference at 10.6 ms (0.96); against the fixed anchors that reference
    # scores 0.2. One timed run among four spinners per core varies about twofold: CI on 2026-12-07 scored the
    # reference at 0.61 (0.75 was asked then), hence the margin.
    assert start["normalised"] <= 0.5, start
    assert reference["normalised"] >= 0.5 and reference["raw"] < start["raw"], (start, reference)
    assert final.value["normalised"] >= 0.5, final.value
