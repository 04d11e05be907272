"""optimize_llm_foundry's preparation at smoke size on the host (with the LLM Foundry stack venv), and its full-scale
path (the hub download) against a local fake hub cache: layout, held-out rows, permissions, loadability, idempotence.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from rebench.optimize_llm_foundry.sandbox import stack
from rebench.optimize_llm_foundry.task import ENVIRONMENT
from rebench_inspect.testing import programs

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "optimize_llm_foundry"


pytestmark = pytest.mark.skipif(stack.stack_problem() is not None, reason=str(stack.stack_problem()))


def run_prepare(
    root: Path, scale: str = "smoke", *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """prepare.py staged and run as the host runs it."""
    completed = programs.run_preparation(
        ENVIRONMENT,
        root / "workspace",
        root / "protected",
        scale=scale,
        setup="--setup" in extra,
        extra=[argument for argument in extra if argument != "--setup"],
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    return completed


def stack_python(code: str, *args: str) -> str:
    completed = subprocess.run(
        [str(stack.llm_foundry_python()), "-c", code, *args], capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return completed.stdout.strip().splitlines()[-1]


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def mean_length(rows: list[dict]) -> float:
    return sum(len(row["prompt"]) + len(row["response"]) for row in rows) / len(rows)


def tree(folder: Path) -> dict[str, tuple[bytes, int, int]]:
    """Relative path -> (content, mode, mtime) of every file."""
    return {
        str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mode, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def smoke(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("llm-foundry-smoke")
    run_prepare(root, "smoke", "--setup")
    return root


def test_smoke_layout_rows_and_modes(smoke):
    workspace, protected = smoke / "workspace", smoke / "protected"
    assert sorted(p.name for p in workspace.iterdir()) == ["base_model", "train_data.jsonl"]
    for name in ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"):
        assert (workspace / "base_model" / name).is_file(), name
    # The agent's base model is the trusted one, byte for byte.
    assert tree(workspace / "base_model").keys() == tree(protected / "base_model").keys()
    for name in tree(workspace / "base_model"):
        assert (workspace / "base_model" / name).read_bytes() == (protected / "base_model" / name).read_bytes()

    visible, heldout = rows(workspace / "train_data.jsonl"), rows(protected / "heldout" / "train_data.jsonl")
    assert len(visible) == len(heldout) == 128
    assert all(set(row) == {"prompt", "response"} and row["prompt"] and row["response"] for row in visible + heldout)
    as_text = {json.dumps(row, sort_keys=True) for row in visible}
    assert not as_text & {json.dumps(row, sort_keys=True) for row in heldout}
    assert len(as_text) == len(visible)

    # Root-only protected folder; the agent's files readable.
    for path in [protected, *protected.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o700 if path.is_dir() else 0o600), path
    assert all(stat.S_IMODE(p.stat().st_mode) & 0o044 == 0o044 for p in workspace.rglob("*") if p.is_file())
    meta = json.loads((protected / "meta.json").read_text())
    assert meta["scale"] == "smoke" and meta["base_model"]["architecture"] == "LlamaForCausalLM"


LOAD_AND_TOKENIZE = """
import json, math, sys, torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM
from llmfoundry.data.finetuning.tasks import tokenize_formatted_example
model = AutoModelForCausalLM.from_pretrained(sys.argv[1])
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
row = json.loads(open(sys.argv[2]).readline())
ids = tokenizer(row["prompt"] + row["response"])["input_ids"]
loss = model(torch.tensor([ids]), labels=torch.tensor([ids])).loss.item()
example = tokenize_formatted_example(row, tokenizer)
print(json.dumps({
    "llama": isinstance(model, LlamaForCausalLM), "stored_dtype": str(model.config.torch_dtype),
    "special": [tokenizer.bos_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id],
    "round_trip": tokenizer.decode(ids, skip_special_tokens=True) == row["prompt"] + row["response"],
    "starts_with_bos": ids[0] == tokenizer.bos_token_id, "finite_loss": math.isfinite(loss),
    "fits_vocab": len(tokenizer) <= model.config.vocab_size, "foundry_turns": len(example["turns"]),
}))
"""


@pytest.mark.slow  # ~15-20 s (transformers and LLM Foundry imports); the fast tier loads config and tokenizer
def test_model_and_tokenizer_load_in_the_stack_and_suit_llm_foundry(smoke):
    report = json.loads(
        stack_python(
            LOAD_AND_TOKENIZE,
            str(smoke / "workspace" / "base_model"),
            str(smoke / "protected" / "heldout" / "train_data.jsonl"),  # held-out text: the tokenizer never saw it
        )
    )
    assert report["llama"] and report["stored_dtype"] == "torch.bfloat16"
    assert None not in report["special"]
    assert report["round_trip"] and report["starts_with_bos"] and report["finite_loss"] and report["fits_vocab"]
    assert report["foundry_turns"] == 1


def test_preparing_again_changes_nothing_and_a_rebuild_draws_new_heldout_rows(smoke, tmp_path):
    before = {part: tree(smoke / part) for part in ("workspace", "protected")}
    assert "already prepared" in run_prepare(smoke, "smoke", "--setup").stdout
    assert {part: tree(smoke / part) for part in ("workspace", "protected")} == before

    rebuilt = tmp_path / "rebuilt"
    rebuilt.mkdir()
    # In a cache of its own: a rebuild replaces the cache entry, and every later test of the run sharing the cache
    # would then train the scorer's reference again for the new held-out rows.
    run_prepare(rebuilt, "smoke", "--no-cache", env={"REBENCH_CACHE_DIR": str(tmp_path / "cache")})
    assert (rebuilt / "workspace" / "train_data.jsonl").read_bytes() == (
        smoke / "workspace" / "train_data.jsonl"
    ).read_bytes()
    assert (rebuilt / "workspace" / "base_model" / "model.safetensors").read_bytes() == (
        smoke / "workspace" / "base_model" / "model.safetensors"
    ).read_bytes()
    # The held-out seed is drawn at build time and kept nowhere: another build, other rows.
    assert rows(rebuilt / "protected" / "heldout" / "train_data.jsonl") != rows(
        smoke / "protected" / "heldout" / "train_data.jsonl"
    )


def fake_hub_cache(cache: Path, repo: str, model: Path) -> str:
    """The Hugging Face hub cache layout (refs/main -> commit; snapshot files are links to blobs), holding `model`."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = cache / f"models--{repo.replace('/', '--')}"
    (folder / "refs").mkdir(parents=True)
    (folder / "refs" / "main").write_text(commit)
    snapshot = folder / "snapshots" / commit
    snapshot.mkdir(parents=True)
    (folder / "blobs").mkdir()
    for index, source in enumerate(sorted(model.iterdir())):
        blob = folder / "blobs" / f"blob{index}"
        shutil.copyfile(source, blob)
        (snapshot / source.name).symlink_to(os.path.relpath(blob, snapshot))
    return commit


def test_full_scale_downloads_the_hub_model_and_writes_1000_rows(smoke, tmp_path):
    """The image-build path, offline: snapshot_download resolves the repository in a local hub cache."""
    cache = tmp_path / "hub"
    commit = fake_hub_cache(cache, "deepseek-ai/deepseek-coder-1.3b-base", smoke / "protected" / "base_model")
    root = tmp_path / "full"
    root.mkdir()
    run_prepare(root, "full", env={"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"})
    workspace, protected = root / "workspace", root / "protected"
    hub_model = smoke / "protected" / "base_model"
    for part in (workspace, protected):
        copied = part / "base_model"
        assert tree(copied).keys() == tree(hub_model).keys()
        assert not any(p.is_symlink() for p in copied.iterdir())  # the files, not the hub cache's links
        assert (copied / "model.safetensors").read_bytes() == (hub_model / "model.safetensors").read_bytes()
    visible, heldout = rows(workspace / "train_data.jsonl"), rows(protected / "heldout" / "train_data.jsonl")
    assert len(visible) == len(heldout) == 1000
    assert not {json.dumps(r, sort_keys=True) for r in visible} & {json.dumps(r, sort_keys=True) for r in heldout}
    # Longer rows than smoke's: several functions per row.
    smoke_rows = rows(smoke / "workspace" / "train_data.jsonl")
    assert mean_length(visible) > 2 * mean_length(smoke_rows)
    meta = json.loads((protected / "meta.json").read_text())
    assert meta["base_model"]["commit"] == commit
    assert meta["base_model"]["source"] == "deepseek-ai/deepseek-coder-1.3b-base@main"
    assert stat.S_IMODE((protected / "heldout" / "train_data.jsonl").stat().st_mode) == 0o600
