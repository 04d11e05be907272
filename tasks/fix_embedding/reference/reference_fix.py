"""Reference solution (the paper's recipe): rebuild the large model's token embedding from the small model's.

1. The corrupted embedding is discarded. The small model's (correct) embedding E_s [vocab, d_small] is mapped into
   the large model's width by a learned affine adapter A: E = E_s A^T + b. Only A and b are trained; the large
   model's transformer body stays frozen, and E is used both as input embedding and (tied) output head.
2. The adapter is folded into the embedding matrix (wte := E_s A^T + b), everything is unfrozen and trained further.
3. fixed_model.pth is saved in the same format and architecture as large_model.pth.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch
from torch import nn
from torch.nn import functional as F

from model import load_checkpoint, save_checkpoint
from tokens import random_batch, read_tokens

SETTINGS = {
    #          adapter phase            full phase                      batch (micro x accumulation)
    "smoke": dict(adapter_steps=70, adapter_lr=1e-2, full_steps=40, full_lr=3e-4, batch=12, micro=12, block=128),
    "full": dict(adapter_steps=400, adapter_lr=1e-3, full_steps=1500, full_lr=3e-5, batch=32, micro=8, block=1024),
}


def body_on_embeddings(model, token_embeddings: torch.Tensor) -> torch.Tensor:
    """The model's transformer body (position embedding, blocks, final norm) on given token embeddings."""
    positions = torch.arange(token_embeddings.shape[1], device=token_embeddings.device)
    x = token_embeddings + model.transformer.wpe(positions)
    for block in model.transformer.h:
        x = block(x)
    return model.transformer.ln_f(x)


def schedule(step: int, steps: int, peak: float) -> float:
    warmup = max(1, steps // 20)
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup))))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", choices=list(SETTINGS), default="full")
    args = parser.parse_args()
    cfg = SETTINGS[args.scale]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    amp = torch.autocast("cuda", dtype=torch.bfloat16) if device == "cuda" else torch.autocast("cpu", enabled=False)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    if args.scale == "smoke":
        torch.set_num_threads(1)  # as its preparation (sandbox_lib/threads.py): two threads spin on a busy small CPU
    torch.set_flush_denormal(True)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    data = read_tokens("train.bin")
    large = load_checkpoint("large_model.pth").to(device)
    small = load_checkpoint("small_correct_model.pth")
    block = min(cfg["block"], large.config.block_size)
    accumulation = cfg["batch"] // cfg["micro"]
    source = small.transformer.wte.weight.detach().to(device)  # [vocab, d_small], correct rows
    del small

    # Phase 1: train only an affine adapter from the small embedding space into the large one.
    for p in large.parameters():
        p.requires_grad_(False)
    adapter = nn.Linear(source.shape[1], large.config.n_embd).to(device)
    with torch.no_grad():  # start with the large embedding's scale
        adapter.weight.mul_(large.transformer.wte.weight.std() / (source @ adapter.weight.T).std())
        adapter.bias.zero_()
    optimizer = torch.optim.AdamW(adapter.parameters(), lr=cfg["adapter_lr"], weight_decay=0.0)
    started = time.time()
    for step in range(cfg["adapter_steps"]):
        for group in optimizer.param_groups:
            group["lr"] = schedule(step, cfg["adapter_steps"], cfg["adapter_lr"])
        for _ in range(accumulation):
            x, y = random_batch(data, cfg["micro"], block, generator, device)
            with amp:
                embedding = adapter(source)
                hidden = body_on_embeddings(large, F.embedding(x, embedding))
                logits = hidden @ embedding.T
                loss = F.cross_entropy(logits.float().reshape(-1, logits.size(-1)), y.reshape(-1))
            (loss / accumulation).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 20 == 0 or step == cfg["adapter_steps"] - 1:
            print(f"adapter step {step}: loss {loss.item():.4f} ({time.time() - started:.0f}s)", flush=True)

    # Phase 2: fold the adapter into the embedding matrix, unfreeze everything, keep training.
    with torch.no_grad():
        large.transformer.wte.weight.copy_(adapter(source))
    for p in large.parameters():
        p.requires_grad_(True)
    optimizer = torch.optim.AdamW(large.parameters(), lr=cfg["full_lr"], weight_decay=0.0, betas=(0.9, 0.95))
    for step in range(cfg["full_steps"]):
        for group in optimizer.param_groups:
            group["lr"] = schedule(step, cfg["full_steps"], cfg["full_lr"])
        for _ in range(accumulation):
            x, y = random_batch(data, cfg["micro"], block, generator, device)
            with amp:
                _, loss = large(x, y)
            (loss / accumulation).backward()
        torch.nn.utils.clip_grad_norm_(large.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % 20 == 0 or step == cfg["full_steps"] - 1:
            print(f"full step {step}: loss {loss.item():.4f} ({time.time() - started:.0f}s)", flush=True)

    tmp = "fixed_model.pth.tmp"
    save_checkpoint(large.cpu().float(), tmp)
    os.replace(tmp, "fixed_model.pth")
    print(f"saved fixed_model.pth after {time.time() - started:.0f}s")


if __name__ == "__main__":
    main()
