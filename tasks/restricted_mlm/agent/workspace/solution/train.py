"""Train the starting model (the one in model.py) and save it to basic_model.pt.

    python train.py [--steps N] [--device cuda|cpu]

All of torch may be used here, outside the forward pass; only the forward pass (token ids in, logits out) is
restricted. Settings of this task (vocabulary size, mask id, ...) are read from ../data/info.json.
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from masking import masked_batch, masked_loss
from model import Model

HERE = Path(__file__).resolve().parent
DATA = HERE.parent / "data"


def main() -> None:
    info = json.loads((DATA / "info.json").read_text())
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=info["start_model"]["steps"])
    parser.add_argument(
        "--batch-size", type=int, default=info["start_model"]["batch_size"]
    )
    parser.add_argument("--lr", type=float, default=info["start_model"]["lr"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )
    parser.add_argument("--output", type=Path, default=HERE / "basic_model.pt")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    data = np.memmap(DATA / "train.bin", dtype=np.uint16, mode="r")
    config = {
        "vocab_size": info["vocab_size"],
        "sequence_length": info["sequence_length"],
        "embed_dim": info["start_model"]["embed_dim"],
        "layer_sizes": info["start_model"]["layer_sizes"],
    }
    model = Model(**config).to(args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    started = time.time()
    for step in range(args.steps):
        inputs, targets, positions = masked_batch(
            data,
            args.batch_size,
            info["sequence_length"],
            mask_prob=info["mask_prob"],
            mask_id=info["mask_id"],
            generator=generator,
        )
        logits = model(
            inputs.to(args.device)
        )  # the forward pass: only allowed operations
        loss = masked_loss(logits, targets.to(args.device), positions.to(args.device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 100 == 0 or step == args.steps - 1:
            print(
                f"step {step}: loss {loss.item():.4f} ({time.time() - started:.0f}s)",
                flush=True,
            )
    torch.save({"config": config, "state_dict": model.state_dict()}, args.output)
    print(f"saved {args.output}")


if __name__ == "__main__":
    main()
