"""Build restricted_mlm's data: one code path at two sizes, under `sandbox_lib.Preparation`.

    <python> prepare.py --scale {smoke,full} --workspace WS --protected P [--setup] [--no-cache]

full  (image build; task setup only checks that the image has it): OpenWebText tokenised with the GPT-2 BPE, split
      by document into training tokens (WS/data/train.bin) and held-out tokens (P/val.bin).
smoke (task setup, CPU): a generated word-level corpus (512 tokens); built once per hash of this file, lm_common
      and the settings into $REBENCH_CACHE_DIR by sandbox_lib.Preparation.
Then, at both scales, the starting model is trained by the workspace's own solution/train.py (as METR's task did at
start-up), writing WS/solution/basic_model.pt: at task setup, once the workspace is laid out (an image build has
no workspace files yet), and never again once it exists. The mask id is the last token id (GPT-2: 50256, its
end-of-text token).

Workspace: data/train.bin, data/info.json (task settings for train.py), data/vocab.json (smoke),
solution/masking.py, solution/basic_model.pt. Protected (700/600): val.bin, meta.json (evaluation settings:
batches, masking rule, seed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from rebench import lm_common
from rebench.lm_common import corpus
from rebench.sandbox_lib import Preparation
from rebench.sandbox_lib.cache import cached_entry
from rebench.sandbox_lib.paths import cache_root
from rebench.sandbox_lib.threads import thread_env

HERE = Path(__file__).resolve().parent

SEQUENCE_LENGTH = 128
MASK_PROB = 0.15
SETTINGS: dict[str, dict] = {
    "smoke": {
        "vocab_words": 511,  # + end-of-text (= mask id) = 512 tokens
        "documents": 900,
        "heldout_documents": 90,
        "data_seed": 4321,
        # A noisier chain than the generator's default, so that even with both neighbours known the masked-token
        # loss stays well above the 1.5 of ln(loss - 1.5).
        "chain": {"successors": 16, "noise": 0.5},
        "eval": {"n_batches": 40, "batch_size": 8, "seed": 1},
        "start_model": {
            "embed_dim": 32,
            "layer_sizes": [256, 256],
            "steps": 200,
            "batch_size": 16,
            "lr": 2e-3,
        },
    },
    "full": {
        "dataset": os.environ.get("REBENCH_OWT_DATASET", "Skylion007/openwebtext"),
        "heldout_documents": 4000,
        "split_seed": 2357,
        # METR: 2000 batches of 8 x 128 tokens; the starting model as METR's train.py built it.
        "eval": {"n_batches": 2000, "batch_size": 8, "seed": 1},
        "start_model": {
            "embed_dim": 256,
            "layer_sizes": [2048, 2048],
            "steps": 500,
            "batch_size": 16,
            "lr": 1e-3,
        },
    },
}


def log(message: str) -> None:
    print(f"[prepare {time.strftime('%H:%M:%S')}] {message}", flush=True)


def starting_model_key(workspace: Path, assets_key: str) -> str:
    """What the starting model is trained from: the prepared data (named by the preparation's key) and the
    workspace's solution code and settings files, as laid out at setup."""
    digest = hashlib.sha256(assets_key.encode())
    for path in sorted([*(workspace / "solution").glob("*.py"), *(workspace / "data").glob("*.json")]):
        digest.update(path.relative_to(workspace).as_posix().encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def train_starting_model(workspace: Path, scale: str, assets_key: str) -> None:
    """Train the starting model with the workspace's own solution/train.py, as METR's task did at start-up, unless
    it is there; trained once per content key into the cache (`sandbox_lib.cache`) and copied in, at smoke scale on
    one thread (`sandbox_lib.threads`). An image build has no workspace files yet (they are laid out at task setup):
    it is trained then."""
    solution = workspace / "solution"
    if not (solution / "train.py").exists():
        log("no solution/train.py yet: the starting model is trained at task setup")
        return
    if (solution / "basic_model.pt").exists():
        log("the starting model is already trained")
        return
    entry = cache_root() / "restricted_mlm" / f"start-model-{starting_model_key(workspace, assets_key)}"

    def train(folder: Path) -> None:
        log("training the starting model with solution/train.py")
        output = folder / "basic_model.pt"
        environment = {**os.environ, **thread_env(scale)}
        subprocess.run([sys.executable, "train.py", "--output", str(output)], cwd=solution, env=environment, check=True)

    entry, trained = cached_entry(entry, train)
    if not trained:
        log(f"using the cached starting model {entry}")
    shutil.copyfile(entry / "basic_model.pt", solution / "basic_model.pt")


def write_assets(workspace: Path, protected: Path, settings: dict, vocab_size: int, scale: str) -> None:
    """Everything after the token files exist: settings files and the masking helper train.py imports."""
    mask_id = vocab_size - 1
    eval_settings = {
        **settings["eval"],
        "vocab_size": vocab_size,
        "sequence_length": SEQUENCE_LENGTH,
        "mask_prob": MASK_PROB,
        "mask_id": mask_id,
    }
    info = {
        "vocab_size": vocab_size,
        "sequence_length": SEQUENCE_LENGTH,
        "mask_prob": MASK_PROB,
        "mask_id": mask_id,
        "start_model": settings["start_model"],
    }
    (workspace / "data" / "info.json").write_text(json.dumps(info, indent=2))
    shutil.copyfile(Path(lm_common.__file__).parent / "masking.py", workspace / "solution" / "masking.py")
    meta = {
        "scale": scale,
        "eval": eval_settings,
        "val_tokens": len(lm_common.read_tokens(protected / "val.bin")),
        "train_tokens": len(lm_common.read_tokens(workspace / "data" / "train.bin")),
    }
    (protected / "meta.json").write_text(json.dumps(meta, indent=2))
    for name in ("val.bin", "meta.json"):
        os.chmod(protected / name, 0o600)


def build_smoke(workspace: Path, protected: Path, settings: dict) -> None:
    words = corpus.synthetic_vocabulary(settings["vocab_words"], settings["data_seed"])
    tokenizer = corpus.WordTokenizer(words)
    documents = corpus.synthetic_documents(settings["documents"], words, settings["data_seed"] + 1, **settings["chain"])
    train_idx, val_idx = corpus.split_documents(
        len(documents), settings["heldout_documents"], settings["data_seed"] + 2
    )
    lm_common.write_tokens(
        workspace / "data" / "train.bin",
        corpus.tokenize_texts((documents[i] for i in train_idx), tokenizer.encode, tokenizer.eot_id),
    )
    lm_common.write_tokens(
        protected / "val.bin",
        corpus.tokenize_texts((documents[i] for i in val_idx), tokenizer.encode, tokenizer.eot_id),
    )
    (workspace / "data" / "vocab.json").write_text(json.dumps(words))
    write_assets(workspace, protected, settings, tokenizer.vocab_size, "smoke")


def build_full(workspace: Path, protected: Path, settings: dict) -> None:
    from datasets import load_dataset

    from rebench.lm_common.gpt2_tokenizer import gpt2_encoding

    encoding = gpt2_encoding()
    num_proc = max(1, (os.cpu_count() or 2) - 1)
    dataset = load_dataset(settings["dataset"], split="train", num_proc=num_proc)
    train_idx, val_idx = corpus.split_documents(len(dataset), settings["heldout_documents"], settings["split_seed"])
    log(f"tokenising {len(train_idx)} training and {len(val_idx)} held-out documents")
    for subset, path, processes in (
        (val_idx, protected / "val.bin", None),
        (train_idx, workspace / "data" / "train.bin", num_proc),
    ):
        corpus.tokenize_dataset(
            dataset.select(subset),
            encoding.encode_ordinary_batch,
            encoding.eot_token,
            path,
            num_proc=processes,
        )
    write_assets(workspace, protected, settings, encoding.n_vocab, "full")


class _Preparation(Preparation):
    """The library's preparation (marker, smoke cache, --setup), then the starting model in the real workspace."""

    def prepare(self, scale: str, workspace: Path, protected: Path, **options: Any) -> str:
        outcome = super().prepare(scale, workspace, protected, **options)
        marker = self.marker(protected) or {}
        train_starting_model(workspace, scale, f"{scale}-{marker.get('key')}")
        return outcome


def build(scale: str, workspace: Path, protected: Path, settings: dict) -> None:
    (workspace / "data").mkdir(parents=True, exist_ok=True)
    (workspace / "solution").mkdir(parents=True, exist_ok=True)
    (build_full if scale == "full" else build_smoke)(workspace, protected, settings)


PREPARATION = _Preparation("restricted_mlm", build, SETTINGS, code=[Path(__file__), Path(lm_common.__file__).parent])


if __name__ == "__main__":
    sys.exit(PREPARATION.main())
