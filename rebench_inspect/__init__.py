"""Host-side machinery shared by every rebench environment, in layers: `spec` (what an environment is: the spec, its
scales and anchors, what a scale resolves to), `runtime` (the task builder, setup, scoring, staging, the sandbox, the
agent), `tools` (reports, calibration, image builds, the prepared-asset cache) and the `cli` over them.

This module is the public face: an environment (`tasks/<name>/`) imports what it needs from here and nothing from the
layers (tests/contract/test_layers.py). The names load on first use: the `rebench` command imports this package, and
its `--help` must not wait for Inspect or pydantic.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

# The name pip knows this project by (PyPI's `rebench` is another project); the import package stays `rebench`.
DISTRIBUTION = "inspect-rebench"

if TYPE_CHECKING:
    from .runtime.environment_task import (
        CommonParameters,
        TaskParameterError,
        environment_task,
        in_rebench_namespace,
        resolve,
    )
    from .runtime.model_proxy import DEFAULT_BUDGET_USD, ModelRoleProxy, PriceTable, ledger_key
    from .runtime.reference import install_reference_solution, sandbox_check_task
    from .runtime.scoring import SandboxService, run_scoring_program, score_log
    from .runtime.smoke import register_smoke_model, smoke_custom_outputs
    from .runtime.staging import sandbox_command, stage_tree
    from .runtime.state import current_layout
    from .runtime.task import build_task
    from .spec.choices import not_one_of
    from .spec.environment import (
        SCALES,
        Anchors,
        EnvironmentSpec,
        FinalRule,
        ResolvedEnvironment,
        Resources,
        Scale,
        Transform,
    )
    from .spec.normalise import final_entry, score_entry
    from .tools.hub_standin import HubRepo, generated_documents, openwebtext, parquet_bytes, tiny_gpt2

# Public name → the module that defines it.
_LAZY = {
    **dict.fromkeys(
        ["SCALES", "Anchors", "EnvironmentSpec", "FinalRule", "ResolvedEnvironment", "Resources", "Scale", "Transform"],
        "spec.environment",
    ),
    **dict.fromkeys(["final_entry", "score_entry"], "spec.normalise"),
    "not_one_of": "spec.choices",
    **dict.fromkeys(
        ["CommonParameters", "TaskParameterError", "environment_task", "in_rebench_namespace", "resolve"],
        "runtime.environment_task",
    ),
    "build_task": "runtime.task",
    **dict.fromkeys(["SandboxService", "run_scoring_program", "score_log"], "runtime.scoring"),
    "current_layout": "runtime.state",
    **dict.fromkeys(["install_reference_solution", "sandbox_check_task"], "runtime.reference"),
    **dict.fromkeys(["DEFAULT_BUDGET_USD", "ModelRoleProxy", "PriceTable", "ledger_key"], "runtime.model_proxy"),
    **dict.fromkeys(["register_smoke_model", "smoke_custom_outputs"], "runtime.smoke"),
    **dict.fromkeys(["sandbox_command", "stage_tree"], "runtime.staging"),
    # What an environment's full_image.py gives a rehearsal's stand-in hub.
    **dict.fromkeys(
        ["HubRepo", "generated_documents", "openwebtext", "parquet_bytes", "tiny_gpt2"], "tools.hub_standin"
    ),
}
# Written out for the linters and type checkers (tests/contract/test_layers.py keeps it equal to `_LAZY`).
__all__ = [
    "DEFAULT_BUDGET_USD",
    "DISTRIBUTION",
    "SCALES",
    "Anchors",
    "CommonParameters",
    "EnvironmentSpec",
    "FinalRule",
    "HubRepo",
    "ModelRoleProxy",
    "PriceTable",
    "ResolvedEnvironment",
    "Resources",
    "SandboxService",
    "Scale",
    "TaskParameterError",
    "Transform",
    "build_task",
    "current_layout",
    "environment_task",
    "final_entry",
    "generated_documents",
    "in_rebench_namespace",
    "install_reference_solution",
    "ledger_key",
    "not_one_of",
    "openwebtext",
    "parquet_bytes",
    "register_smoke_model",
    "resolve",
    "run_scoring_program",
    "sandbox_command",
    "sandbox_check_task",
    "score_entry",
    "score_log",
    "smoke_custom_outputs",
    "stage_tree",
    "tiny_gpt2",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_LAZY[name]}", __name__), name)
