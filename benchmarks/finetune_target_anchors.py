"""Re-measure finetune_target's smoke anchors, and check the direction they promise.

    python benchmarks/finetune_target_anchors.py

On the host (CPU), with the offline smoke judge behind a local OpenAI-compatible endpoint (no Inspect, no network):
prepares the smoke assets (cached in $REBENCH_CACHE_DIR), then scores three submissions with the scoring program:
the starting model (the start anchor), the reference solution's model (the reference anchor) and an untrained,
randomly initialised model of the same architecture (noise level, which must score below the start). Prints one
JSON object; every number is deterministic for a given machine's torch build. About two minutes on 2 cores.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from rebench.lm_common.model import GPT, GPTConfig  # noqa: E402
from tests.finetune_target.conftest import (  # noqa: E402
    TASK,
    FakeJudge,
    fresh_copy,
    run_prepare,
    score,
)


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
    measured: dict = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "torch": torch.__version__,
    }
    with tempfile.TemporaryDirectory(prefix="ft-anchors-") as tmp:
        root = Path(tmp)
        (root / "assets" / "workspace").mkdir(parents=True)
        completed = run_prepare(root / "assets" / "workspace", root / "assets" / "protected")
        assert completed.returncode == 0, completed.stderr[-2000:]
        judge = FakeJudge()
        try:
            workspace, protected = fresh_copy(root / "assets", root / "start")
            measured["start"] = summary(score(workspace, protected, judge.env))

            workspace, protected = fresh_copy(root / "assets", root / "noise")
            random_model_checkpoint(workspace)
            measured["random_init"] = summary(score(workspace, protected, judge.env))

            workspace, protected = fresh_copy(root / "assets", root / "reference")
            for item in (TASK / "reference").iterdir():
                shutil.copy2(item, workspace / item.name)
            started = time.time()
            subprocess.run(
                ["bash", "solve.sh"],
                cwd=workspace,
                check=True,
                capture_output=True,
                env={**os.environ, **judge.env, "PYTHON": sys.executable},
            )
            measured["reference_training_s"] = round(time.time() - started, 1)
            measured["reference"] = summary(score(workspace, protected, judge.env))
        finally:
            judge.close()
    print(json.dumps(measured, indent=2))


if __name__ == "__main__":
    main()
