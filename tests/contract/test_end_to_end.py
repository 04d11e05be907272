"""Every discovered environment end to end at smoke scale on the local sandbox: a scripted agent lists its
workspace, puts the reference solution's result in place (built once per machine by the fixture `reference_result`),
scores it, reads its score log and submits; the start and the reference reproduce the environment's smoke anchors.
A timed environment keeps its built-in smoke anchors here (measuring them at setup adds `smoke_anchor_runs` scoring
runs each of the start and the reference: four LLM Foundry runs) and its times are checked by their order where a
busy machine cannot turn it (optimize_kernel's are 56x apart; optimize_llm_foundry's 2x, checked where its test runs
alone: `Reproduction.order_checked_alone`), so this test runs beside the other lane of CI. Measuring anchors at setup
(one piece of machinery for every timed environment) is checked on optimize_kernel, in its container
(tests/docker/test_environments.py) and under load (tests/optimize_kernel/test_busy_machine.py); `rebench demo`
measures optimize_llm_foundry's.

What is specific to one environment stays in its folder (tests/<env>/): rust's proxy budgets, finetune's judge and
re-scoring, the kernel under load, scaling_law's last-answer rule.
"""

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.reference import SANDBOX_CHECK_TOLERANCE
from rebench_inspect.runtime.sandbox import local_problems
from rebench_inspect.testing.fixtures import fixed_smoke_anchors, scored_sample
from rebench_inspect.testing.scripted import scripted_agent, tool_call


@dataclass(frozen=True)
class Reproduction:
    """How closely one environment's smoke run lands on its anchors: the raw distance of the start and of the
    reference from `anchors.start` and `anchors.reference` (None: it varies with the machine, as a timed
    environment's, so only the order counts), and the normalised score the reference must pass (None: a timed
    environment's, normalised here against anchors measured on another machine)."""

    start_within: float | None
    reference_within: float | None
    normalised_above: float | None
    programs: tuple[str, ...] = ()  # what it runs on this machine beyond Python (skips without them)
    fast: bool = False  # in the fast tier; every other one is `slow`
    # A timed environment whose start and reference are closer than the other lane's load can stretch one run (about
    # 2x on two cores): the test that checks their order alone on the host (`timed`); here only their validity.
    order_checked_alone: str | None = None


REPRODUCTIONS = {
    # The smoke judge is deterministic, the reference's training is not across CPUs: the sandbox check's tolerance.
    "finetune_target": Reproduction(1e-6, None, 1 - SANDBOX_CHECK_TOLERANCE),
    "fix_embedding": Reproduction(1.0, 0.3, 0.8),  # the start varies with the sample's secret permutation
    "optimize_kernel": Reproduction(None, None, None),  # the reference is much faster even in the CPU interpreter
    "optimize_llm_foundry": Reproduction(
        None, None, None, order_checked_alone="tests/optimize_llm_foundry/test_scoring.py::test_start_and_reference"
    ),
    "restricted_mlm": Reproduction(0.05, 0.05, 0.9, fast=True),
    "rust_codecontests": Reproduction(0.0, 0.0, 1 - 1e-6, programs=("rustc",)),
    "scaling_law": Reproduction(1e-6, 0.1, 0.8),
}


def environments() -> list:
    return [
        pytest.param(
            environment,
            id=name,
            marks=[] if name in REPRODUCTIONS and REPRODUCTIONS[name].fast else [pytest.mark.slow],
        )
        for name, environment in sorted(ENVIRONMENTS.items())
    ]


@pytest.mark.parametrize("environment", environments())
def test_scripted_agent_reproduces_the_smoke_anchors(environment, smoke_eval, request):
    expected = REPRODUCTIONS.get(environment.name)
    assert expected is not None, f"REPRODUCTIONS says nothing of {environment.name}: how close it lands on its anchors"
    missing = [*local_problems(environment), *(p for p in expected.programs if shutil.which(p) is None)]
    if missing:
        pytest.skip("; ".join(missing))
    # Prepared only once the machine can run the environment.
    smoke_assets = request.getfixturevalue("smoke_assets")
    reference_result = request.getfixturevalue("reference_result")
    agent = scripted_agent(
        [
            tool_call("bash", command="ls"),
            tool_call("bash", command=f"cp -a {reference_result}/. ./"),  # tools start in the workspace
            tool_call("score"),
            tool_call("score_log"),
        ]
    )
    sample, score = scored_sample(smoke_eval(environment, agent, anchors=fixed_smoke_anchors(environment)))
    listing, _, scored, score_log = [m.text for m in sample.messages if m.role == "tool"][:4]
    starting_files = {path.name for path in smoke_assets.workspace.iterdir() if not path.name.startswith(".")}
    assert starting_files <= set(listing.split()), listing
    assert "valid" in scored and "INVALID" not in scored and "Working time used" in scored, scored
    assert score_log.splitlines()[-1].endswith(" left."), score_log
    entries = score.metadata["score_log"]
    assert [entry["label"] for entry in entries] == ["start", "agent", "final"]
    assert all(entry["valid"] for entry in entries), entries
    start, reference = entries[0], entries[1]
    anchors = environment.anchors["smoke"]
    if expected.start_within is not None:
        assert start["raw"] == pytest.approx(anchors.start, abs=expected.start_within)
    if expected.reference_within is not None:
        assert reference["raw"] == pytest.approx(anchors.reference, abs=expected.reference_within)
    if expected.order_checked_alone is None:
        better = reference["raw"] < start["raw"] if environment.lower_is_better else reference["raw"] > start["raw"]
        assert better, (start["raw"], reference["raw"])
    if expected.normalised_above is not None:
        assert reference["normalised"] > expected.normalised_above, reference
        assert score.value["normalised"] > expected.normalised_above, score.value


def test_an_order_left_to_another_test_is_checked_there_alone():
    root = Path(__file__).resolve().parents[2]
    for expected in REPRODUCTIONS.values():
        if expected.order_checked_alone is not None:
            path, name = expected.order_checked_alone.split("::")
            assert f"@pytest.mark.timed\ndef {name}(" in (root / path).read_text(), expected.order_checked_alone
