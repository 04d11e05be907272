"""Re-measure finetune_target's smoke anchors, and check the direction they promise.

    python benchmarks/finetune_target_anchors.py

On the host (CPU), with the offline smoke judge behind a local OpenAI-compatible endpoint (no Inspect, no network):
prepares the smoke assets (cached in $REBENCH_CACHE_DIR), then scores three submissions with the scoring program:
the starting model (the start anchor), the reference solution's model (the reference anchor) and an untrained,
randomly initialised model of the same architecture (noise level, which must score below the start). Prints one
JSON object; every number is deterministic for a given machine's torch build. About two minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import torch
from finetune_target_timings import score, smoke_judge
from timing import machine, time_reference

from rebench.finetune_target.task import ENVIRONMENT
from rebench.lm_common.model import GPT, GPTConfig
from rebench_inspect.testing.fixtures import prepare_smoke_assets


def random_model_checkpoint(workspace: Path, seed: int = 0) -> None:
    """Replace the submission with an untrained model of the same architecture (seeded initialisation)."""
    path = workspace / "submission" / "model.pt"
    config = torch.load(path, weights_only=True)["config"]
    torch.manual_seed(seed)
    model = GPT(GPTConfig.from_dict(config))
    torch.save({"config": config, "model": model.state_dict()}, path)


def summary(result: dict) -> dict:
    assert result["valid"], result["message"]
    return {
        "raw": result["raw"],
        "win_rates": result["details"]["win_rates"],
        "stderr": round(result["details"]["stderr"], 4),
    }


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args()
    measured: dict = {"date": time.strftime("%Y-%m-%d"), "machine": machine(), "torch": torch.__version__}
    with tempfile.TemporaryDirectory(prefix="ft-anchors-") as tmp:
        root = Path(tmp)
        assets = prepare_smoke_assets(ENVIRONMENT, root / "assets")
        with smoke_judge() as judge:
            workspace, protected = assets.copy_to(root / "start")
            measured["start"] = summary(score(workspace, protected, judge)[1])

            workspace, protected = assets.copy_to(root / "noise")
            random_model_checkpoint(workspace)
            measured["random_init"] = summary(score(workspace, protected, judge)[1])

            workspace, protected = assets.copy_to(root / "reference")
            measured["reference_training_s"] = round(time_reference(ENVIRONMENT, workspace, env=judge.env), 1)
            measured["reference"] = summary(score(workspace, protected, judge)[1])
    print(json.dumps(measured, indent=2))


if __name__ == "__main__":
    main()
