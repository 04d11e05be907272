"""Fuzz: malformed submission files (generation.json, model.pt) end in a verdict (issue 21), never a crash.

Each scoring run here costs seconds (the scoring program imports torch), so the generated variants run only with
`-m slow`; the two overflow cases (crashes found by this fuzz) stay in the fast tier."""

import json

import pytest
import torch

from tests import fuzz_inputs
from tests.finetune_target.conftest import run_scoring

VALID_SETTINGS = {"temperature": 1.0, "top_k": 50, "max_new_tokens": 60}


@pytest.fixture
def env(smoke_assets, tmp_path):
    return smoke_assets.copy_to(tmp_path)


def _verdict(workspace, protected, fake_judge) -> dict:
    completed = run_scoring(workspace, protected, fake_judge.env, timeout=300)
    return fuzz_inputs.assert_verdict(completed, protected / "result.json")


@pytest.mark.fuzz
@pytest.mark.parametrize(
    "variant", fuzz_inputs.params(fuzz_inputs.file_variants() + fuzz_inputs.json_variants(VALID_SETTINGS))
)
def test_malformed_generation_settings_get_a_verdict(env, fake_judge, variant):
    workspace, protected = env
    # Without a checkpoint the verdict comes right after the settings are read: the fuzz stays fast.
    (workspace / "submission" / "model.pt").unlink()
    variant.write(workspace / "submission" / "generation.json")
    assert not _verdict(workspace, protected, fake_judge)["valid"]


@pytest.mark.fuzz
@pytest.mark.parametrize("variant", fuzz_inputs.params(fuzz_inputs.file_variants()))
def test_malformed_checkpoint_files_get_a_verdict(env, fake_judge, variant):
    workspace, protected = env
    variant.write(workspace / "submission" / "model.pt")
    assert not _verdict(workspace, protected, fake_judge)["valid"]


def test_sampling_that_overflows_the_logits_is_invalid(env, fake_judge):
    """A temperature just above 0 divides the logits into infinities: nothing can be sampled, a verdict follows."""
    workspace, protected = env
    (workspace / "submission" / "generation.json").write_text(json.dumps({"temperature": 1e-300}))
    result = _verdict(workspace, protected, fake_judge)
    assert not result["valid"] and "NaN or infinite" in result["message"]
    assert fake_judge.calls == 0


def test_weights_whose_logits_overflow_are_invalid(env, fake_judge):
    """Finite but huge weights make infinite logits: an invalid submission, not a scorer crash."""
    workspace, protected = env
    path = workspace / "submission" / "model.pt"
    checkpoint = torch.load(path, weights_only=True)
    state = checkpoint.get("model", checkpoint)
    state["transformer.wte.weight"].fill_(3e38)
    state.pop("lm_head.weight", None)  # tied: taken from the embedding
    torch.save(checkpoint, path)
    result = _verdict(workspace, protected, fake_judge)
    assert not result["valid"] and "NaN or infinite" in result["message"]
