"""A simple starting point: REINFORCE from pairwise judge preferences.

Each step samples two answers per prompt from the current model, asks the judge which is better, and raises the
log-probability of the preferred answer while lowering the other's (reward +1 / −1, 0 when the judge's verdict is
unreadable). The result is saved to submission/model.pt. It trains, but weakly: few steps, one sample pair per
prompt, no baseline, no KL penalty.

    python train_rl.py [--steps N] [--prompts-per-step P] [--lr LR]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import torch
from torch.nn import functional as F

import chat
import model as model_code
from evaluation import Judge

HERE = Path(__file__).resolve().parent


def sequence_logprob(model, prompt_ids: list[int], answer_ids: list[int], device: str) -> torch.Tensor:
    block = model.config.block_size
    ids = (prompt_ids + answer_ids)[-(block + 1):]
    n = min(len(answer_ids), len(ids) - 1)
    x = torch.tensor(ids[:-1], device=device)[None]
    y = torch.tensor(ids[1:], device=device)[None]
    logits, _ = model(x)
    logp = F.log_softmax(logits.float(), dim=-1).gather(-1, y[..., None]).squeeze(-1)
    return logp[0, -n:].sum() if n > 0 else logp.sum() * 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--prompts-per-step", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    settings = json.loads((HERE / "data" / "settings.json").read_text())
    tokenizer = chat.load_tokenizer(settings["tokenizer"], settings.get("vocabulary"))
    sampling = chat.SamplingSettings(**settings["default_sampling"])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model_code.load_checkpoint(HERE / "models" / "base_model.pt").float().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    judge = Judge()
    prompts = chat.read_jsonl(HERE / "data" / "dev_prompts.jsonl")
    rng = random.Random(args.seed)
    for step in range(args.steps):
        batch = rng.sample(prompts, min(args.prompts_per_step, len(prompts)))
        model.eval()
        texts = [r["prompt"] for r in batch for _ in range(2)]
        samples = chat.generate_responses(model, tokenizer, texts, sampling, seed=args.seed * 100 + step)
        verdicts = judge.compare_many([(chat.instruction_text(r), samples[2 * i], samples[2 * i + 1])
                                       for i, r in enumerate(batch)])
        model.train()
        loss = torch.zeros((), device=device)
        for i, (record, verdict) in enumerate(zip(batch, verdicts)):
            if verdict is None:
                continue
            winner, loser = (samples[2 * i], samples[2 * i + 1]) if verdict == "A" else (samples[2 * i + 1], samples[2 * i])
            prompt_ids = tokenizer.encode(record["prompt"])
            loss = loss - sequence_logprob(model, prompt_ids, tokenizer.encode(winner) + [tokenizer.eot_id], device)
            loss = loss + sequence_logprob(model, prompt_ids, tokenizer.encode(loser) + [tokenizer.eot_id], device)
        optimizer.zero_grad(set_to_none=True)
        (loss / len(batch)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        print(f"step {step + 1}/{args.steps}: loss {float(loss) / len(batch):.3f}", flush=True)
    model_code.save_checkpoint(model.eval(), HERE / "submission" / "model.pt")
    print("saved submission/model.pt")


if __name__ == "__main__":
    main()
