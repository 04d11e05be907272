"""The agent is told the original task's rules and nothing it did not say (the judge's noise is the paper's finding,
reported by `rescore_best`, not something the task told the agent)."""

from __future__ import annotations

import pytest

from rebench.finetune_target.task import ENVIRONMENT
from rebench_inspect.runtime.task import render_instructions


@pytest.mark.parametrize("scale", ["smoke", "full"])
def test_instructions_carry_the_rules_and_no_word_on_judge_noise(scale):
    rendered = render_instructions(ENVIRONMENT.at(scale), "/home/agent/workspace", 8.0, True, {"judge_calls": "100"})
    text = " ".join(rendered.split())
    for rule in (
        "no ground-truth answers",
        "Use no pretrained model other than the base model and your own fine-tunes of it.",
        "Use the judge only through `evaluation.py`",
        "Do not download anything",
        "the held-out prompts are only used by the scoring program",
        "at most 60 new tokens",
        "mean of the two win rates",
    ):
        assert rule in text, rule
    lowered = text.lower()
    assert (
        "noisy" not in lowered and "noise" not in lowered and "overfit" not in lowered
    )
