"""optimize_llm_foundry's full image, for the build rehearsal (`rebench images rehearse optimize_llm_foundry`,
rebench_inspect/tools/rehearsal.py): preparation downloads deepseek-coder-1.3b-base;
the LLM Foundry stack lives in a venv of its own.
"""

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from rebench_inspect import HubRepo

# Where sandboxes/optimize_llm_foundry/requirements.txt installs (install_llm_foundry.sh), not the shared venv.
OWN_VENV = "/opt/llm-foundry"
# docs/fidelity.md, optimize_llm_foundry's software row: what llm-foundry 0.11.0 brings, and flash-attn.
FIDELITY_PINS = {
    OWN_VENV: {
        "llm-foundry": "0.11.0",
        "torch": "2.3.1",
        "mosaicml": "0.23.5",
        "transformers": "4.43.4",
        "flash-attn": "2.6.3",
    }
}
# The torch releases in the image: the base's (scoring) and the stack's.
IMAGE_TORCH = ("2.13.0", "2.3.1")


def tiny_deepseek_coder(repo_id: str) -> HubRepo:
    """deepseek-coder's family at toy size (LlamaForCausalLM, byte-level BPE with its special tokens), made by the
    smoke scale's own code (make_base_model.py in the LLM Foundry venv of this host): the files `save_pretrained`
    writes, which the full scale's `snapshot_download` then fetches by the same patterns."""
    from rebench.environments import ENVIRONMENTS
    from rebench_inspect import sandbox_command, stage_tree

    from .sandbox import prepare as foundry
    from .sandbox import stack

    smoke: dict[str, Any] = dict(foundry.SETTINGS["smoke"])
    with tempfile.TemporaryDirectory(prefix="rebench-standin-") as folder:
        texts, model, code = Path(folder) / "rows.jsonl", Path(folder) / "model", Path(folder) / "code"
        foundry.write_rows(
            texts, foundry.generate_rows(smoke["rows"], smoke["visible_seed"], smoke["functions_per_row"])
        )
        # The stack's Python runs the staged tree, as preparation does in the image.
        stage_tree(ENVIRONMENTS[__package__.rpartition(".")[2]], code)
        arguments = ["tiny", str(model), "--texts", str(texts), "--settings", json.dumps(smoke["base_model"]["make"])]
        command, cwd = sandbox_command(
            f"{foundry.__package__}.make_base_model", arguments, python=str(stack.llm_foundry_python()), code_dir=code
        )
        subprocess.run(command, cwd=cwd, check=True, capture_output=True, timeout=900)
        return HubRepo("model", repo_id, {path.name: path.read_bytes() for path in sorted(model.iterdir())})


def hub_repos() -> list[HubRepo]:
    from .sandbox.prepare import SETTINGS

    full: dict[str, Any] = dict(SETTINGS["full"])
    return [tiny_deepseek_coder(full["base_model"]["download"]["repo"])]
