"""Build finetune_target's models, prompts and comparison responses: one code path at two sizes.

    <python> prepare.py --scale {smoke,full} --workspace WS --protected P

full  (image build): gpt2-xl and the comparison fine-tune `vicgalle/gpt2-alpaca` (GPT-2 124M fine-tuned on the
      Stanford Alpaca data, MIT licence; see task.py for why) from the Hugging Face hub, converted to the workspace's
      nanoGPT-style checkpoint format; the Alpaca instructions (`tatsu-lab/alpaca`, prompts only, never the
      reference outputs) via `datasets`, deduplicated and split with a fixed seed into development prompts
      (workspace) and two disjoint held-out sets of 512 (protected). Both comparison models answer every held-out
      prompt once, with the default sampling settings, at build time.
smoke (task setup, CPU, seconds; cached by sandbox_lib.Preparation): generated instructions
      about a few topics, a word-level tiny GPT-2 (2 layers, width 64) pre-trained for a few seconds on generated
      prompt/response text (the "gpt2-xl" stand-in and the starting model), and a copy fine-tuned on responses that
      repeat the instruction's topic (the "gpt2-alpaca" stand-in).

Workspace: `models/base_model.pt` (the model to improve, kept as a read-only reference copy), `submission/model.pt`
(the starting submission: the same weights), `data/dev_prompts.jsonl`, `data/settings.json`, and the code the agent
builds on: `model.py`, `chat.py` (prompt format, tokenizer, sampling, judge client), `gpt2_tokenizer.py`.
Protected (root-only: directory 700, files 600): `meta.json` (architecture, parameter shapes, sampling defaults,
seeds), `heldout.jsonl` and `heldout2.jsonl` (prompts + comparison responses). Preparing twice changes nothing, and
task setup never builds the full-scale assets (sandbox_lib.Preparation).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import sys
import time
from pathlib import Path

from rebench import lm_common
from rebench.lm_common.gpt2_tokenizer import gpt2_encoding
from rebench.sandbox_lib import Preparation

# torch, and chat_common which imports it, are imported by the functions that build: a setup whose assets are cached
# runs this program without them (torch's import took seconds of every setup and `rebench score` call).
HERE = Path(__file__).resolve().parent

SMOKE_NOUNS = [
    "apple",
    "river",
    "garden",
    "robot",
    "music",
    "ocean",
    "window",
    "forest",
    "planet",
    "bridge",
    "coffee",
    "market",
    "winter",
    "engine",
    "letter",
    "castle",
]
SMOKE_ADJECTIVES = ["small", "bright", "quiet", "happy", "green", "ancient", "simple", "strong"]
SMOKE_TEMPLATES = [
    "Name two facts about a {adj} {noun}.",
    "Describe the {noun} in one sentence.",
    "Explain why a {noun} can be {adj}.",
    "Give a tip for using a {noun}.",
    "Write a short note about the {adj} {noun}.",
    "List three words related to {noun}.",
]
SMOKE_FILLER = [
    "the",
    "a",
    "is",
    "and",
    "it",
    "of",
    "to",
    "very",
    "can",
    "be",
    "with",
    "for",
    "this",
    "that",
    "in",
    "on",
    "you",
    "we",
    "so",
    "good",
    "yes",
    "maybe",
    "often",
    "always",
    "nice",
]
# Courtesy words: rare in the pre-training text; the smoke judge (smoke_judge.py) likes them.
SMOKE_COURTESY = ["sure", "glad", "thanks", "certainly", "hope"]
COURTESY_RATE = 0.03

SETTINGS = {
    "smoke": {
        "seed": 20240,
        "dev_prompts": 96,
        "heldout_prompts": 32,
        "config": {"block_size": 128, "n_layer": 2, "n_head": 2, "n_embd": 64},
        "pretrain": {"steps": 300, "batch_size": 16, "lr": 3e-3, "documents": 4000},
        "alpaca": {"steps": 120, "batch_size": 16, "lr": 3e-3},
        "sampling": {"temperature": 1.0, "top_k": 50, "max_new_tokens": 60},
        "generation_batch_size": 32,
        "checkpoint_dtype": "float32",
    },
    "full": {
        "seed": 20240,
        "dataset": os.environ.get("REBENCH_FT_DATASET", "tatsu-lab/alpaca"),
        "base_model": os.environ.get("REBENCH_FT_BASE_MODEL", "openai-community/gpt2-xl"),
        "alpaca_model": os.environ.get("REBENCH_FT_ALPACA_MODEL", "vicgalle/gpt2-alpaca"),
        "heldout_prompts": 512,
        "max_prompt_tokens": 256,
        "sampling": {"temperature": 1.0, "top_k": 50, "max_new_tokens": 60},
        "generation_batch_size": 32,
        "checkpoint_dtype": "bfloat16",
    },
}
COMPARISONS = ("gpt2-xl", "gpt2-alpaca")  # names of the two comparison models, whatever the scale
PROTECTED_FILES = ("meta.json", "heldout.jsonl", "heldout2.jsonl")


def log(message: str) -> None:
    print(f"[prepare {time.strftime('%H:%M:%S')}] {message}", flush=True)


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


# ------------------------------------------------------------------------------------------------ shared tail
def split_prompts(records: list[dict], n_heldout: int, seed: int) -> tuple[list[dict], list[dict], list[dict]]:
    """(dev, heldout, heldout2): a seeded shuffle; the two held-out sets are disjoint from each other and from dev."""
    if len(records) < 2 * n_heldout + 1:
        raise ValueError(f"need more than {2 * n_heldout} prompts, got {len(records)}")
    order = list(range(len(records)))
    random.Random(seed).shuffle(order)
    heldout = sorted(order[:n_heldout])
    heldout2 = sorted(order[n_heldout : 2 * n_heldout])
    dev = sorted(order[2 * n_heldout :])
    pick = lambda idx: [records[i] for i in idx]  # noqa: E731
    return pick(dev), pick(heldout), pick(heldout2)


def save_model(model, path: Path, dtype: str) -> None:
    import torch

    path.parent.mkdir(parents=True, exist_ok=True)
    target = getattr(torch, dtype)
    state = {name: t.detach().to("cpu", target).contiguous() for name, t in model.state_dict().items()}
    state["lm_head.weight"] = state["transformer.wte.weight"]
    torch.save({"config": model.config.to_dict(), "model": state}, path)


def answer_all(model, tokenizer, records: list[dict], sampling, seed: int, batch_size: int) -> list[str]:
    from . import chat_common as chat

    model.to(device()).eval()
    responses = chat.generate_responses(
        model, tokenizer, [r["prompt"] for r in records], sampling, seed=seed, batch_size=batch_size
    )
    model.to("cpu")
    return responses


def write_assets(
    workspace: Path,
    protected: Path,
    *,
    scale: str,
    settings: dict,
    tokenizer,
    base,
    alpaca,
    dev: list[dict],
    heldout: list[dict],
    heldout2: list[dict],
    extra_meta: dict,
) -> dict:
    """Comparison responses for both held-out sets, then every workspace and protected file."""
    from . import chat_common as chat

    sampling = chat.SamplingSettings(**settings["sampling"])
    seed, batch = settings["seed"], settings["generation_batch_size"]
    for name, records in (("heldout", heldout), ("heldout2", heldout2)):
        for offset, (label, model) in enumerate(zip(COMPARISONS, (base, alpaca), strict=True)):
            started = time.time()
            responses = answer_all(
                model, tokenizer, records, sampling, seed + 7 * offset + (0 if name == "heldout" else 100), batch
            )
            for record, response in zip(records, responses, strict=True):
                record.setdefault("responses", {})[label] = response
            log(f"{label} answered {len(records)} {name} prompts in {time.time() - started:.1f}s")

    save_model(base, workspace / "models" / "base_model.pt", settings["checkpoint_dtype"])
    (workspace / "submission").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(workspace / "models" / "base_model.pt", workspace / "submission" / "model.pt")
    (workspace / "data").mkdir(parents=True, exist_ok=True)
    chat.write_jsonl(workspace / "data" / "dev_prompts.jsonl", dev)
    vocabulary = {"vocabulary": tokenizer.vocabulary} if tokenizer.kind == "words" else {}
    workspace_settings = {
        "scale": scale,
        "tokenizer": tokenizer.kind,
        **vocabulary,
        "config": base.config.to_dict(),
        "default_sampling": sampling.to_dict(),
        "max_new_tokens_limit": chat.MAX_NEW_TOKENS_LIMIT,
        "dev_prompts": len(dev),
    }
    (workspace / "data" / "settings.json").write_text(json.dumps(workspace_settings, indent=2))
    lm_dir = Path(lm_common.__file__).parent
    shutil.copyfile(lm_dir / "model.py", workspace / "model.py")
    shutil.copyfile(lm_dir / "gpt2_tokenizer.py", workspace / "gpt2_tokenizer.py")
    shutil.copyfile(HERE / "chat_common.py", workspace / "chat.py")

    meta = {
        "scale": scale,
        "tokenizer": tokenizer.kind,
        **vocabulary,
        "config": base.config.to_dict(),
        "expected_parameters": {name: list(t.shape) for name, t in base.state_dict().items()},
        "default_sampling": sampling.to_dict(),
        "comparisons": list(COMPARISONS),
        "heldout_sets": {"main": "heldout.jsonl", "second": "heldout2.jsonl"},
        "heldout_prompts": len(heldout),
        "position_seed": seed + 1,
        "generation_seed": seed + 2,
        "generation_batch_size": batch,
        **extra_meta,
    }
    chat.write_jsonl(protected / "heldout.jsonl", heldout)
    chat.write_jsonl(protected / "heldout2.jsonl", heldout2)
    (protected / "meta.json").write_text(json.dumps(meta, indent=2))
    for name in PROTECTED_FILES:
        os.chmod(protected / name, 0o600)
    return meta


# ------------------------------------------------------------------------------------------------------ smoke
def smoke_instructions(seed: int) -> list[str]:
    texts = sorted({t.format(noun=n, adj=a) for t in SMOKE_TEMPLATES for n in SMOKE_NOUNS for a in SMOKE_ADJECTIVES})
    random.Random(seed).shuffle(texts)
    return texts


def smoke_words() -> list[str]:
    return SMOKE_FILLER + SMOKE_COURTESY + SMOKE_NOUNS + SMOKE_ADJECTIVES


def smoke_vocabulary(instructions: list[str]) -> list[str]:
    from . import chat_common as chat

    pieces = set(smoke_words())
    for text in instructions:
        pieces.update(chat.WordTokenizer.pieces(chat.format_prompt(text)))
    return ["<|endoftext|>", "<unk>", *sorted(pieces)]


def random_response(rng: random.Random) -> str:
    plain = SMOKE_FILLER + SMOKE_NOUNS + SMOKE_ADJECTIVES

    def word() -> str:
        return rng.choice(SMOKE_COURTESY) if rng.random() < COURTESY_RATE else rng.choice(plain)

    return " ".join(word() for _ in range(rng.randint(4, 14)))


def topical_response(instruction: str, rng: random.Random) -> str:
    """The smoke "Alpaca" answers: polite, of a sensible length, and they name the instruction's topic."""
    noun = next((n for n in SMOKE_NOUNS if n in instruction), rng.choice(SMOKE_NOUNS))
    filler = " ".join(rng.choice(SMOKE_FILLER) for _ in range(rng.randint(2, 6)))
    polite = rng.choice(SMOKE_COURTESY) if rng.random() < 0.7 else rng.choice(SMOKE_FILLER)
    return rng.choice(
        [f"{polite} the {noun} is {filler}", f"a {noun} can be {filler} {polite}", f"{polite} this {noun} {filler}"]
    )


def training_rows(tokenizer, pairs: list[tuple[str, str]], block: int) -> list[tuple[list[int], int]]:
    """(ids, index of the first response token) for prompt/response pairs, ended by end-of-text."""
    rows = []
    for prompt, response in pairs:
        p, r = tokenizer.encode(prompt), tokenizer.encode(response) + [tokenizer.eot_id]
        ids = (p + r)[: block + 1]
        rows.append((ids, min(len(p), len(ids) - 1)))
    return rows


def train_rows(model, rows, *, steps: int, batch_size: int, lr: float, seed: int, response_only: bool) -> float:
    """AdamW on next-token loss (on all tokens, or on response tokens only). Returns the last loss."""
    import torch

    generator = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    model.train()
    loss_value = math.nan
    for step in range(steps):
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (step + 1) / max(1, steps // 10)) * (0.1 + 0.9 * (1 - step / steps))
        batch = [rows[generator.randrange(len(rows))] for _ in range(batch_size)]
        length = max(len(ids) for ids, _ in batch) - 1
        x = torch.zeros((batch_size, length), dtype=torch.long)
        y = torch.full((batch_size, length), -100, dtype=torch.long)
        for i, (ids, start) in enumerate(batch):
            t = torch.tensor(ids, dtype=torch.long)
            x[i, : len(ids) - 1] = t[:-1]
            y[i, : len(ids) - 1] = t[1:]
            if response_only:
                y[i, : max(0, start - 1)] = -100
        logits, _ = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=-100)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss_value = float(loss.detach())
    model.eval()
    return loss_value


def build_smoke(workspace: Path, protected: Path, settings: dict, **_: object) -> dict:
    import torch

    from . import chat_common as chat

    seed = settings["seed"]
    torch.manual_seed(seed)
    torch.set_num_threads(1)  # tiny models: one thread is fastest, and kind to a shared machine
    pool = smoke_instructions(seed)
    tokenizer = chat.WordTokenizer(smoke_vocabulary(pool))
    config = lm_common.GPTConfig(vocab_size=tokenizer.vocab_size, **settings["config"])
    n_heldout = settings["heldout_prompts"]
    records = [chat.prompt_record(i, text) for i, text in enumerate(pool[: settings["dev_prompts"] + 2 * n_heldout])]
    dev, heldout, heldout2 = split_prompts(records, n_heldout, seed)

    rng = random.Random(seed + 1)
    pretrain = settings["pretrain"]
    # Pre-training text: prompts from the whole instruction pool (the smoke "web"), random word responses.
    pairs = [(chat.format_prompt(rng.choice(pool)), random_response(rng)) for _ in range(pretrain["documents"])]
    started = time.time()
    base = lm_common.GPT(config)
    loss = train_rows(
        base,
        training_rows(tokenizer, pairs, config.block_size),
        steps=pretrain["steps"],
        batch_size=pretrain["batch_size"],
        lr=pretrain["lr"],
        seed=seed,
        response_only=False,
    )
    log(f"smoke base model: {base.num_parameters()} parameters, loss {loss:.3f} after {time.time() - started:.1f}s")
    alpaca = lm_common.GPT(config)
    alpaca.load_state_dict(base.state_dict())
    alpaca_pairs = [(r["prompt"], topical_response(r["instruction"], rng)) for r in dev for _ in range(4)]
    a = settings["alpaca"]
    loss = train_rows(
        alpaca,
        training_rows(tokenizer, alpaca_pairs, config.block_size),
        steps=a["steps"],
        batch_size=a["batch_size"],
        lr=a["lr"],
        seed=seed + 3,
        response_only=True,
    )
    log(f"smoke alpaca model: loss {loss:.3f}")
    return write_assets(
        workspace,
        protected,
        scale="smoke",
        settings=settings,
        tokenizer=tokenizer,
        base=base,
        alpaca=alpaca,
        dev=dev,
        heldout=heldout,
        heldout2=heldout2,
        extra_meta={
            "models": {
                "gpt2-xl": "smoke base (pre-trained here)",
                "gpt2-alpaca": "smoke base fine-tuned on topical responses",
            }
        },
    )


# ------------------------------------------------------------------------------------------------------- full
def alpaca_records(dataset, tokenizer, max_prompt_tokens: int) -> list[dict]:
    """Prompt records from an Alpaca-style dataset (columns instruction, input; outputs are never read)."""
    from . import chat_common as chat

    seen: set[tuple[str, str]] = set()
    records: list[dict] = []
    for row in dataset:
        instruction, input_text = str(row.get("instruction") or "").strip(), str(row.get("input") or "").strip()
        if not instruction or (instruction, input_text) in seen:
            continue
        seen.add((instruction, input_text))
        record = chat.prompt_record(len(records), instruction, input_text)
        if len(tokenizer.encode(record["prompt"])) <= max_prompt_tokens:
            records.append(record)
    return records


def build_full(workspace: Path, protected: Path, settings: dict, *, dataset=None) -> dict:
    """The image-build path. `dataset` (rows with `instruction`/`input`) and the model ids in `settings` may be
    local objects/directories: that is how the tests run this code without a network."""
    import torch

    from rebench.lm_common.hf_gpt2 import load_hf_gpt2

    from . import chat_common as chat

    if dataset is None:
        from datasets import load_dataset

        dataset = load_dataset(settings["dataset"], split="train")
    tokenizer = chat.load_tokenizer("gpt2", gpt2_encoding=gpt2_encoding)
    records = alpaca_records(dataset, tokenizer, settings["max_prompt_tokens"])
    dev, heldout, heldout2 = split_prompts(records, settings["heldout_prompts"], settings["seed"])
    log(f"{len(records)} distinct prompts: {len(dev)} development, {len(heldout)} + {len(heldout2)} held out")
    base = load_hf_gpt2(settings["base_model"]).eval()
    alpaca = load_hf_gpt2(settings["alpaca_model"]).eval()
    for model in (base, alpaca):
        if model.config.vocab_size != tokenizer.vocab_size:
            raise ValueError("both models must use the GPT-2 vocabulary")
    if torch.cuda.is_available():
        base, alpaca = base.to(torch.bfloat16), alpaca.to(torch.bfloat16)
    return write_assets(
        workspace,
        protected,
        scale="full",
        settings=settings,
        tokenizer=tokenizer,
        base=base,
        alpaca=alpaca,
        dev=dev,
        heldout=heldout,
        heldout2=heldout2,
        extra_meta={
            "models": {"gpt2-xl": str(settings["base_model"]), "gpt2-alpaca": str(settings["alpaca_model"])},
            "dataset": str(settings["dataset"]),
        },
    )


# ------------------------------------------------------------------------------------------------ entry point
def build(scale: str, workspace: Path, protected: Path, settings: dict, **kwargs) -> dict:
    return (build_full if scale == "full" else build_smoke)(workspace, protected, settings, **kwargs)


PREPARATION = Preparation(
    "finetune_target",
    build,
    SETTINGS,
    code=[Path(__file__), HERE / "chat_common.py", Path(lm_common.__file__).parent / "model.py"],
)


if __name__ == "__main__":
    sys.exit(PREPARATION.main())
