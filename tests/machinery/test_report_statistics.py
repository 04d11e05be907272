"""The report's statistics on synthetic runs with known answers (docs/benchmark.md: best-of-k, bootstrap CIs, Scaling
Law)."""

import math
import random

from rebench_inspect.tools.report import (
    Run,
    TimePoint,
    analyse,
    best_of_k_curve,
    best_so_far,
    bootstrap_mean_ci,
    expected_best_of_k,
)


def make_run(environment: str, score: float, index: int = 0, **fields) -> Run:
    defaults = {
        "source": f"log.eval#{environment}@{index}",
        "log_file": "log.eval",
        "sample_id": environment,
        "epoch": index + 1,
        "environment": environment,
        "group": "mockllm/model",
        "scale": "smoke",
        "time_budget_hours": 2.0,
        "normalised": score,
        "valid": True,
        "anchors": "paper",
    }
    return Run(**{**defaults, **fields})


def test_best_of_k_of_constant_scores_is_the_constant_with_a_zero_width_ci():
    curve = best_of_k_curve({"a": [0.4] * 3, "b": [0.8] * 5}, set(), 4, 200, random.Random(0))
    assert [point.k for point in curve] == [1, 2, 3, 4]
    for point in curve:
        assert math.isclose(point.estimate, 0.6)
        assert math.isclose(point.ci_low, 0.6) and math.isclose(point.ci_high, 0.6)
    assert curve[3].short_environments == ["a"]


def test_best_of_k_is_the_exact_expected_max_of_draws_with_replacement():
    # two runs 0 and 1: best of k is 1 unless all k draws are the 0 run
    for k in range(1, 5):
        assert math.isclose(expected_best_of_k([0.0, 1.0], k), 1 - 0.5**k)
    # Monte Carlo agrees on an uneven sample
    scores, rng = [0.1, 0.5, 0.2, 0.9], random.Random(1)
    simulated = sum(max(rng.choices(scores, k=3)) for _ in range(100_000)) / 100_000
    assert abs(expected_best_of_k(scores, 3) - simulated) < 0.005


def test_scaling_law_counts_a_random_run_so_best_of_k_stays_the_mean():
    curve = best_of_k_curve(
        {"scaling_law": [0.0, 1.0], "kernel": [0.0, 1.0]}, {"scaling_law"}, 3, 100, random.Random(0)
    )
    # kernel: 1 - 0.5^k; scaling_law: 0.5 whatever k
    assert [round(p.estimate, 6) for p in curve] == [round((0.5 + 1 - 0.5**k) / 2, 6) for k in (1, 2, 3)]
    runs = [make_run("scaling_law", s, i, final_rule="last") for i, s in enumerate([0.0, 1.0])]
    [cohort] = analyse(runs, max_k=3, samples=100).cohorts
    assert all(math.isclose(point.estimate, 0.5) for point in cohort.best_of_k)


def test_bootstrap_ci_shrinks_with_more_runs():
    rng = random.Random(0)
    few_low, few_high = bootstrap_mean_ci([0.0, 1.0] * 2, 2000, rng)
    many_low, many_high = bootstrap_mean_ci([0.0, 1.0] * 50, 2000, rng)
    assert few_low < many_low <= 0.5 <= many_high < few_high
    assert many_high - many_low < (few_high - few_low) / 3


def test_table_rows_and_warnings_for_what_would_mislead():
    runs = [
        make_run("kernel", 0.2, 0),
        make_run("kernel", 0.6, 1),
        make_run("kernel", 0.0, 2, valid=False),  # no valid score: counts as 0, with a warning
        make_run("kernel", None, 3, ended_by="error", error="sandbox died"),  # left out
        make_run("embed", 0.5, 0),
        make_run("embed", 0.7, 1, anchors="calibration.json"),  # other anchors: own row, out of best-of-k
        make_run("rust", 1.0, 0, group="human", time_budget_hours=8.0),
        # the final scoring failed on the agent's files: an invalid run, counted, with a warning
        make_run("rust", 0.0, 1, group="human", time_budget_hours=8.0, valid=False, scoring_failure=True),
    ]
    report = analyse(runs, samples=200)
    rows = {(row.environment, row.group, row.anchors): row for row in report.rows}
    kernel = rows[("kernel", "mockllm/model", "paper")]
    assert kernel.runs == 3 and math.isclose(kernel.mean_normalised, 0.8 / 3) and kernel.invalid_only_runs == 1
    assert kernel.ci_low <= kernel.mean_normalised <= kernel.ci_high
    assert "log.eval#kernel@3" not in kernel.sources
    assert rows[("embed", "mockllm/model", "calibration.json")].runs == 1
    text = "\n".join(report.warnings)
    assert "log.eval#kernel@3: cut short by an error" in text
    assert "log.eval#kernel@2: no valid score" in text
    assert "embed was scored with different anchors" in text
    rust = rows[("rust", "human", "paper")]
    assert rust.runs == 2 and rust.scoring_failures == 1 and kernel.scoring_failures == 0
    assert "log.eval#rust@1: the final scoring failed on the agent's files; counted as an invalid entry" in text
    [agents, humans] = sorted(report.cohorts, key=lambda cohort: cohort.group != "mockllm/model")
    assert agents.environments == ["kernel"] and humans.group == "human"
    # kernel: runs 0, 0.2, 0.6; best of 2 = Σ x(i) ((i/3)^2 − ((i−1)/3)^2)
    assert math.isclose(agents.best_of_k[1].estimate, 0.2 * (4 - 1) / 9 + 0.6 * (9 - 4) / 9)


def test_best_so_far_follows_the_final_rule():
    timeline = [TimePoint(0, 0.0), TimePoint(10, 0.8), TimePoint(20, None), TimePoint(30, 0.3)]
    assert best_so_far(make_run("k", 0.8, timeline=timeline), [5, 15, 25, 35]) == [0.0, 0.8, 0.8, 0.8]
    assert best_so_far(make_run("s", 0.3, final_rule="last", timeline=timeline), [5, 15, 25, 35]) == [
        0.0,
        0.8,
        0.8,
        0.3,
    ]
