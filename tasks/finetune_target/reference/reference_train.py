"""Reference solution of finetune_target: expert iteration with the judge as the only teacher.

Each round: sample k answers per development prompt from the current model, pick the best of them with a
knock-out tournament judged through the harness's judge endpoint (k − 1 judge calls per prompt), then fine-tune on
the (prompt, winning answer) pairs. After the last round the submission is saved with sharper sampling settings
(temperature 0.7, top-k 8, 20 new tokens), as in the paper's reference. No ground-truth or hand-written answers are
used; the judge sees only the model's own samples.

    python reference_train.py [--rounds R] [--k K] [--prompts N]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch
from torch.nn import functional as F

import chat
from model import GPT, GPTConfig

HERE = Path(__file__).resolve().parent
PRESETS = {
    "words": {"rounds": 8, "k": 4, "prompts": 48, "steps_per_round": 80, "batch_size": 16, "lr": 2e-3},
    "gpt2": {"rounds": 4, "k": 8, "prompts": 2048, "steps_per_round": 400, "batch_size": 16, "lr": 1e-5},
}
FINAL_SAMPLING = {"temperature": 0.7, "top_k": 8, "max_new_tokens": 20}
CANDIDATE_SAMPLING = chat.SamplingSettings(temperature=1.0, top_k=0, max_new_tokens=40)


def log(message: str) -> None:
    print(f"[reference {time.strftime('%H:%M:%S')}] {message}", flush=True)


def load_model(path: Path, device: str) -> GPT:
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    model = GPT(GPTConfig.from_dict(checkpoint["config"]))
    model.load_state_dict({k: v.float() for k, v in checkpoint["model"].items()})
    return model.to(device)


def save_model(model: GPT, path: Path, dtype: torch.dtype) -> None:
    state = {k: v.detach().to("cpu", dtype).contiguous() for k, v in model.state_dict().items()}
    state["lm_head.weight"] = state["transformer.wte.weight"]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save({"config": model.config.to_dict(), "model": state}, tmp)
    tmp.replace(path)


def tournament(judge: chat.JudgeClient, records: list[dict], candidates: list[list[str]], rng: random.Random) -> list[str]:
    """The winner of a knock-out bracket per prompt; every round of matches is judged concurrently."""
    alive = [list(c) for c in candidates]
    while any(len(a) > 1 for a in alive):
        jobs, where = [], []
        for i, pool in enumerate(alive):
            for j in range(0, len(pool) - 1, 2):
                first, second = (pool[j], pool[j + 1]) if rng.random() < 0.5 else (pool[j + 1], pool[j])
                jobs.append((chat.instruction_text(records[i]), first, second))
                where.append((i, j, first, second))
        verdicts = judge.compare_many(jobs)
        nxt = [[] for _ in alive]
        for (i, j, first, second), (verdict, _) in zip(where, verdicts):
            nxt[i].append(second if verdict == "B" else first)
        for i, pool in enumerate(alive):
            if len(pool) % 2 == 1 and len(pool) > 1:
                nxt[i].append(pool[-1])
            if len(pool) == 1:
                nxt[i] = pool
        alive = nxt
    return [a[0] for a in alive]


def fine_tune(model: GPT, tokenizer, pairs: list[tuple[str, str]], *, steps: int, batch_size: int, lr: float,
              device: str, seed: int) -> float:
    rows = []
    block = model.config.block_size
    for prompt, answer in pairs:
        p = tokenizer.encode(prompt)
        full = p + tokenizer.encode(answer) + [tokenizer.eot_id]
        cut = max(0, len(full) - (block + 1))
        rows.append((full[cut:], max(1, len(p) - cut)))  # (ids, index of the first answer token)
    rng = random.Random(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    model.train()
    last = float("nan")
    for step in range(steps):
        batch = [rows[rng.randrange(len(rows))] for _ in range(batch_size)]
        length = max(len(ids) for ids, _ in batch) - 1
        x = torch.zeros((batch_size, length), dtype=torch.long)
        y = torch.full((batch_size, length), -100, dtype=torch.long)
        for i, (ids, start) in enumerate(batch):
            t = torch.tensor(ids)
            x[i, : len(ids) - 1] = t[:-1]
            y[i, start - 1 : len(ids) - 1] = t[start:]
        x, y = x.to(device), y.to(device)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            logits, _ = model(x)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1), ignore_index=-100)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        last = float(loss.detach())
    model.eval()
    return last


def main() -> None:
    settings = json.loads((HERE / "data" / "settings.json").read_text())
    preset = PRESETS["gpt2" if settings["tokenizer"] == "gpt2" else "words"]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for key, value in preset.items():
        parser.add_argument(f"--{key.replace('_', '-')}", type=type(value), default=value)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cpu":
        torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    tokenizer = chat.load_tokenizer(settings["tokenizer"], settings.get("vocabulary"))
    # 48 in flight: at smoke scale a tournament stage's calls at once (96, then 48); the bridge collects calls every 2 s.
    judge = chat.JudgeClient(*chat.endpoint_from_environment(HERE), concurrency=48)
    prompts = chat.read_jsonl(HERE / "data" / "dev_prompts.jsonl")
    model = load_model(HERE / "models" / "base_model.pt", device)
    for round_index in range(args.rounds):
        started = time.time()
        records = rng.sample(prompts, min(args.prompts, len(prompts)))
        model.eval()
        flat = [r["prompt"] for r in records for _ in range(args.k)]
        answers = chat.generate_responses(model, tokenizer, flat, CANDIDATE_SAMPLING, seed=args.seed * 1000 + round_index,
                                          batch_size=64)
        candidates = [answers[i * args.k:(i + 1) * args.k] for i in range(len(records))]
        winners = tournament(judge, records, candidates, rng)
        loss = fine_tune(model, tokenizer, [(r["prompt"], w) for r, w in zip(records, winners) if w.strip()],
                         steps=args.steps_per_round, batch_size=args.batch_size, lr=args.lr, device=device,
                         seed=args.seed + round_index)
        log(f"round {round_index + 1}/{args.rounds}: {len(records)} prompts × {args.k} samples, "
            f"fine-tuning loss {loss:.3f}, {time.time() - started:.1f}s")
    dtype = torch.bfloat16 if settings["tokenizer"] == "gpt2" else torch.float32
    save_model(model, HERE / "submission" / "model.pt", dtype)
    (HERE / "submission" / "generation.json").write_text(json.dumps(FINAL_SAMPLING))
    log("saved submission/model.pt and submission/generation.json")


if __name__ == "__main__":
    main()
