"""Loss of a checkpoint on a sample of the TRAINING tokens (a rough local check; scoring uses held-out data).

python evaluate.py [fixed_model.pth] [--batches 40] [--batch-size 2] [--block-size 1024]
"""

import argparse

import torch
from model import load_checkpoint
from tokens import evaluate_loss, read_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("checkpoint", nargs="?", default="fixed_model.pth")
    parser.add_argument("--data", default="train.bin")
    parser.add_argument("--batches", type=int, default=40)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--block-size", type=int, default=1024)
    args = parser.parse_args()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = load_checkpoint(args.checkpoint).to(device)
    data = read_tokens(args.data)
    block = min(args.block_size, model.config.block_size)
    loss = evaluate_loss(
        model,
        data,
        n_batches=args.batches,
        batch_size=args.batch_size,
        block_size=block,
        device=device,
    )
    print(
        f"{args.checkpoint}: loss {loss:.4f} on {args.batches} x {args.batch_size} x {block} training tokens"
    )


if __name__ == "__main__":
    main()
