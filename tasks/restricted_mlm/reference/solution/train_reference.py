"""Train the reference model: precompute the bigram prior from the training tokens, then train everything.

python train_reference.py [--steps N] [--device cuda|cpu]
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from masking import masked_batch, masked_loss
from model import ReferenceModel

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"
SETTINGS = {  # by vocabulary size: smoke (512 tokens) or full (GPT-2)
    "smoke": {
        "dim": 48,
        "width": 5,
        "layers": 2,
        "steps": 250,
        "batch_size": 16,
        "lr": 3e-3,
    },
    "full": {
        "dim": 512,
        "width": 7,
        "layers": 6,
        "steps": 20000,
        "batch_size": 64,
        "lr": 1e-3,
    },
}


def bigram_log_probs(
    data: np.ndarray, vocab_size: int, mask_id: int, smoothing: float = 0.1
):
    """(left, right): left[a, t] = log P(t | previous token a); right[b, t] = log P(t | next token b) - log P(t).
    Row `mask_id` (a masked neighbour) is the unigram distribution for left and zero for right."""
    tokens = torch.from_numpy(np.asarray(data, dtype=np.int64))
    pairs = torch.bincount(
        tokens[:-1] * vocab_size + tokens[1:], minlength=vocab_size * vocab_size
    )
    counts = (
        pairs.reshape(vocab_size, vocab_size).float() + smoothing
    )  # counts[a, b]: a followed by b
    unigram = torch.log(counts.sum(0) / counts.sum())
    left = torch.log(counts / counts.sum(1, keepdim=True))
    right = torch.log(counts / counts.sum(0, keepdim=True)).t() - unigram
    left[mask_id], right[mask_id] = unigram, 0.0
    return left, right


def main() -> None:
    info = json.loads((DATA / "info.json").read_text())
    scale = "smoke" if info["vocab_size"] < 50000 else "full"
    settings = SETTINGS[scale]
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=settings["steps"])
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )
    args = parser.parse_args()

    if scale == "smoke":
        torch.set_num_threads(1)  # as the starting model (sandbox_lib/threads.py): two threads spin on a busy small CPU
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    data = np.memmap(DATA / "train.bin", dtype=np.uint16, mode="r")
    config = {
        "vocab_size": info["vocab_size"],
        "sequence_length": info["sequence_length"],
        "mask_id": info["mask_id"],
        "dim": settings["dim"],
        "width": settings["width"],
        "layers": settings["layers"],
    }
    model = ReferenceModel(**config)
    left, right = bigram_log_probs(data, info["vocab_size"], info["mask_id"])
    with torch.no_grad():
        model.left_prior.weight.copy_(left)
        model.right_prior.weight.copy_(right)
    model.to(args.device)
    optimizer = torch.optim.AdamW(
        model.parameters(), lr=settings["lr"], weight_decay=0.0
    )
    schedule = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=settings["lr"], total_steps=args.steps, pct_start=0.1
    )
    started = time.time()
    for step in range(args.steps):
        inputs, targets, positions = masked_batch(
            data,
            settings["batch_size"],
            info["sequence_length"],
            mask_prob=info["mask_prob"],
            mask_id=info["mask_id"],
            generator=generator,
        )
        loss = masked_loss(
            model(inputs.to(args.device)),
            targets.to(args.device),
            positions.to(args.device),
        )
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(
                f"step {step}: loss {loss.item():.4f} ({time.time() - started:.0f}s)",
                flush=True,
            )
    torch.save(
        {"config": config, "state_dict": model.cpu().state_dict()},
        HERE / "reference_model.pt",
    )


if __name__ == "__main__":
    main()
