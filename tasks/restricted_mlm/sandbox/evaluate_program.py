"""Masked-LM loss of a checked graph on the held-out tokens (TRUSTED: run by score.py as root, no agent code).

    python -I evaluate_program.py PROGRAM_DIR PROTECTED_DIR RESULT_JSON

PROGRAM_DIR holds program.json and weights.pt, copied by score.py out of the agent's reach. The graph is checked
against the allow-list (graph_program.py), then run on `n_batches` batches drawn from PROTECTED_DIR/val.bin with
a fixed seed: random windows of `sequence_length` tokens, each token masked with probability `mask_prob` (replaced
by `mask_id`); the loss is the cross-entropy on the masked positions, averaged per batch then over batches.
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import lm_common
import torch
from graph_program import MAX_PROGRAM_BYTES, Invalid, Program, load_program
from lm_common.masking import masked_batch, masked_loss
from sandbox_lib import Invalid as UntrustedFileInvalid
from sandbox_lib.untrusted_files import read_json


def evaluate(program: Program, data, settings: dict, device: torch.device) -> float:
    """Mean masked cross-entropy of `program` over the fixed evaluation batches."""
    generator = torch.Generator().manual_seed(settings["seed"])
    vocab_size, batch_size, sequence_length = (
        settings["vocab_size"],
        settings["batch_size"],
        settings["sequence_length"],
    )
    total = 0.0
    for _ in range(settings["n_batches"]):
        inputs, targets, positions = masked_batch(
            data,
            batch_size,
            sequence_length,
            mask_prob=settings["mask_prob"],
            mask_id=settings["mask_id"],
            generator=generator,
        )
        logits = program.run(inputs.to(device))
        if tuple(logits.shape) != (batch_size, sequence_length, vocab_size) or not logits.is_floating_point():
            raise Invalid(
                f"the model returned {tuple(logits.shape)} {logits.dtype} logits, expected floating-point logits "
                f"of shape {(batch_size, sequence_length, vocab_size)}"
            )
        loss = float(masked_loss(logits, targets.to(device), positions.to(device)))
        if not math.isfinite(loss):
            raise Invalid("the loss is NaN or infinite on a held-out batch")
        total += loss
    return total / settings["n_batches"]


def main(argv: list[str]) -> int:
    program_dir, protected, result_path = Path(argv[0]), Path(argv[1]), Path(argv[2])
    settings = json.loads((protected / "meta.json").read_text())["eval"]
    started = time.time()
    result: dict
    try:
        graph = read_json(
            program_dir / "program.json", "program.json", max_bytes=MAX_PROGRAM_BYTES, allow_non_finite=True
        )
        program = load_program(graph, program_dir / "weights.pt")
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        data = lm_common.read_tokens(protected / "val.bin")
        loss = evaluate(program.to(device), data, settings, device)
        result = {
            "ok": True,
            "loss": loss,
            "device": device.type,
            "ops_seen": program.ops_seen,
            "eval_seconds": round(time.time() - started, 2),
        }
    except (Invalid, UntrustedFileInvalid) as error:
        result = {
            "ok": False,
            "message": str(error),
            "ops_seen": getattr(error, "ops_seen", None),
        }
    except torch.OutOfMemoryError:
        result = {"ok": False, "message": "out of memory while running the model"}
    except (
        RuntimeError,
        TypeError,
        ValueError,
        IndexError,
    ) as error:  # an allowed operator rejecting its arguments
        first = str(error).splitlines()[0][:400] if str(error) else type(error).__name__
        result = {
            "ok": False,
            "message": f"running the exported forward pass failed: {first}",
        }
    Path(result_path).write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
