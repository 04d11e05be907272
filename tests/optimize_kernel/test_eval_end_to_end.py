"""The sandbox check end to end at smoke scale on the local sandbox under load (the agent path with the reference
kernel is the environment's case of tests/contract/test_end_to_end.py)."""

import pytest
from inspect_ai import eval

# Slow tier (`pytest -m slow`, run by CI): an end-to-end eval (setup, anchors measured, scoring runs).
pytestmark = pytest.mark.slow


def test_a_busy_machine_still_sees_the_reference_beat_the_start():
    """Issue 23: under load the fixed smoke anchors put the reference at 0. Every core kept busy by a spinning
    process, the sandbox check measures both solutions at setup and normalises against those."""
    import os
    import subprocess
    import sys

    from rebench.maintenance import sandbox_check

    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]
    try:
        [log] = eval(sandbox_check(environment="optimize_kernel", scale="smoke", sandbox="local"), model="none",
                     display="none", log_dir=None)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()
    assert log.status == "success", log.error
    final = {s.metadata["solution"]: s.scores["rebench_scorer"].metadata for s in log.samples}
    assert all(meta["anchors"]["provenance"].startswith("measured at this sample's setup") for meta in final.values())
    unclipped = {solution: meta["score_log"][-1]["normalised_unclipped"] for solution, meta in final.items()}
    assert unclipped["reference"] > unclipped["starting"], unclipped
