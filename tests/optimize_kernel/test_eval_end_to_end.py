"""The agent path end to end at smoke scale on the local sandbox: a scripted agent working in its current directory
puts the reference kernel in place, scores it, reads its score log and time left, and submits."""

import pytest
from inspect_ai import eval
from inspect_ai.model import get_model

from rebench.optimize_kernel.task import optimize_kernel
from tests.conftest import tool_call
from tests.optimize_kernel.conftest import REFERENCE_SOLUTION

# Slow tier (`pytest -m slow`, run by CI): end-to-end evals (setup, agent, scoring runs).
pytestmark = pytest.mark.slow


def test_scripted_agent_scores_the_reference_kernel_written_in_its_cwd():
    model = get_model(
        "mockllm/model",
        custom_outputs=[
            tool_call("bash", command="ls"),
            tool_call("bash", command=f"cp {REFERENCE_SOLUTION} solution.py"),
            tool_call("score"),
            tool_call("score_log"),
            tool_call("submit", answer="done"),
        ],
    )
    task = optimize_kernel(scale="smoke", sandbox="local", agent_user=None, time_budget_hours=0.5)
    [log] = eval(task, model=model, display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    listing, _, scored, score_log = [m.text for m in sample.messages if m.role == "tool"][:4]
    assert listing.split() == ["solution.py"]
    assert "valid" in scored and "INVALID" not in scored and "Working time used" in scored
    assert score_log.splitlines()[-1].endswith(" left.")
    entries = sample.scores["rebench_scorer"].metadata["score_log"]
    assert [entry["label"] for entry in entries] == ["start", "agent", "final"]
    assert all(entry["valid"] for entry in entries)
    # the reference is much faster than the start even in the CPU interpreter
    assert entries[1]["normalised"] > 0.5


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
