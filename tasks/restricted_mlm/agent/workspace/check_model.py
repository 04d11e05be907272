"""Check solution/model.py against the rules the way the scorer does, on a batch of the training tokens.

    python check_model.py

Uses copies of the scorer's own code (rules/export_model.py, rules/graph_program.py): it traces the forward pass
with torch.export, lists the operators it uses, refuses any that is not allowed, and runs the recorded graph.
Passing here means the scorer's check will pass too (the score itself uses held-out data).
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "rules"))
sys.path.insert(0, str(HERE / "solution"))

import export_model  # noqa: E402
import graph_program  # noqa: E402
from masking import masked_batch, masked_loss  # noqa: E402


def main() -> int:
    info = json.loads((HERE / "data" / "info.json").read_text())
    model = export_model.load_model(HERE / "solution")
    example = torch.zeros(8, info["sequence_length"], dtype=torch.long)
    program, weights = export_model.export_graph(model, example)
    try:
        checked = graph_program.parse_program(json.loads(json.dumps(program)), weights)
        data = np.memmap(HERE / "data" / "train.bin", dtype=np.uint16, mode="r")
        inputs, targets, positions = masked_batch(
            data,
            8,
            info["sequence_length"],
            mask_prob=info["mask_prob"],
            mask_id=info["mask_id"],
        )
        loss = float(masked_loss(checked.run(inputs), targets, positions))
    except graph_program.Invalid as error:
        print(f"NOT ALLOWED: {error}")
        return 1
    for op, count in checked.ops_seen.items():
        print(f"  {count:4d} x {op}")
    print(f"OK: only allowed operations; masked loss on one training batch {loss:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
