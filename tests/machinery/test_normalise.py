"""The paper's transform and normalisation (docs/benchmark.md: Scores, The seven environments), and the final-entry
rules."""

import math

import pytest

from rebench_inspect.runtime.scoring import final_score
from rebench_inspect.spec.environment import FinalRule, Transform
from rebench_inspect.spec.normalise import final_entry, normalise, score_entry, transform

# docs/benchmark.md's table: raw anchors and the transformed values it prints.
SPEC_TABLE = [
    ("optimize_llm_foundry", Transform.LOG, 272, 94, 5.6058, 4.5433),
    ("optimize_kernel", Transform.LOG, 4.76, 1.6, 1.5602, 0.4700),
    ("fix_embedding", Transform.LOG_LOSS, 10.491, 2.8, 2.1962, 0.2624),
    ("restricted_mlm", Transform.LOG_LOSS, 7.636, 4.6, 1.8142, 1.1314),
    ("scaling_law", Transform.IDENTITY, 0.24, 0.80, 0.24, 0.80),
    ("finetune_target", Transform.IDENTITY, 0.54, 0.85, 0.54, 0.85),
    ("rust_codecontests", Transform.IDENTITY, 0.0, 21 / 165, 0.0, 0.1273),
]


@pytest.mark.parametrize("name,kind,raw_start,raw_ref,y_start,y_ref", SPEC_TABLE)
def test_transform_reproduces_the_spec_table(name, kind, raw_start, raw_ref, y_start, y_ref):
    assert transform(kind, raw_start) == pytest.approx(y_start, abs=6e-4)
    assert transform(kind, raw_ref) == pytest.approx(y_ref, abs=6e-4)
    assert normalise(transform(kind, raw_start), y_start, y_ref) == pytest.approx(0, abs=2e-3)
    assert normalise(transform(kind, raw_ref), y_start, y_ref) == pytest.approx(1, abs=2e-3)


def test_best_human_kernel_time_normalises_to_about_1_8():
    # tasks/optimize_kernel/README.md: best human 0.67 ms; docs/benchmark.md: the paper saw normalised scores up to
    # ~1.8 (no upper clip).
    y = transform(Transform.LOG, 0.67)
    assert normalise(y, math.log(4.76), math.log(1.6)) == pytest.approx(1.80, abs=0.01)


def test_worse_than_start_is_clipped_to_zero_and_undefined_losses_are_nan():
    assert normalise(math.log(10.0), math.log(4.76), math.log(1.6)) == 0.0
    assert math.isnan(transform(Transform.LOG_LOSS, 1.4))
    assert math.isnan(transform(Transform.LOG, 0.0))


def _entries(environment, raws):
    return [
        score_entry(
            environment.at("smoke"),
            index=i,
            label="agent",
            wall_time_s=i,
            working_time_s=None,
            valid=raw is not None,
            raw=raw,
            message="",
        )
        for i, raw in enumerate(raws)
    ]


def test_best_rule_takes_the_best_valid_entry_and_last_rule_the_last(toy_environment):
    entries = _entries(toy_environment, [10.0, 4.0, None, 8.0, None])
    assert final_entry(entries, FinalRule.BEST).raw == 4.0
    assert final_entry(entries, FinalRule.LAST).raw == 8.0


def test_a_loss_below_the_irreducible_loss_is_an_invalid_entry(toy_environment):
    environment = toy_environment.model_copy(update={"transform": Transform.LOG_LOSS})
    [entry] = _entries(environment, [1.2])
    assert not entry.valid and entry.normalised is None


def test_no_valid_entry_scores_normalised_zero_never_a_raw_zero(toy_environment):
    # The original kernel scorer turned "all invalid" into raw 0 = ln(1 ms), better than the start.
    score = final_score(_entries(toy_environment, [None, None]), toy_environment.at("smoke"))
    assert score.value["normalised"] == 0.0
    assert math.isnan(score.value["transformed"])
    assert score.metadata["raw"] is None and score.metadata["valid"] is False
