"""A plain training loop: continue training a checkpoint on train.bin and save the result.

    python train.py --init large_model.pth --out fixed_model.pth --steps 1000 --lr 3e-4

Uses the GPU when there is one (bf16 autocast). A starting point, not a recipe.
"""

import argparse
import math
import time

import torch
from model import load_checkpoint, save_checkpoint
from tokens import evaluate_loss, random_batch, read_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--init", default="large_model.pth")
    parser.add_argument("--out", default="fixed_model.pth")
    parser.add_argument("--data", default="train.bin")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--grad-accum", type=int, default=1)
    parser.add_argument("--block-size", type=int, default=1024)
    parser.add_argument("--eval-every", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    generator = torch.Generator().manual_seed(args.seed)
    model = load_checkpoint(args.init).to(device)
    block = min(args.block_size, model.config.block_size)
    params = list(model.parameters())
    optimizer = torch.optim.AdamW(
        params, lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0
    )
    data = read_tokens(args.data)
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=device == "cuda")
    started = time.time()
    for step in range(args.steps):
        lr = (
            args.lr
            * min(1.0, (step + 1) / 100)
            * 0.5
            * (1 + math.cos(math.pi * step / args.steps))
        )
        for group in optimizer.param_groups:
            group["lr"] = lr
        for _ in range(args.grad_accum):
            x, y = random_batch(data, args.batch_size, block, generator, device)
            with autocast:
                _, loss = model(x, y)
            (loss / args.grad_accum).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if step % args.eval_every == 0 or step == args.steps - 1:
            print(
                f"step {step} loss {loss.item():.4f} lr {lr:.2e} ({time.time() - started:.0f}s)",
                flush=True,
            )
    # A sample of the training tokens; the official score uses held-out data.
    sample_loss = evaluate_loss(
        model, data, n_batches=10, batch_size=2, block_size=block, device=device
    )
    print(f"loss on a training sample: {sample_loss:.4f}")
    save_checkpoint(model.float().cpu(), args.out)


if __name__ == "__main__":
    main()
