"""Optimize LLM Foundry (METR `ai_rd_optimize_llm_foundry`, README.md)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import optimize_llm_foundry

__all__ = ["optimize_llm_foundry"]


def __getattr__(name: str) -> object:
    # The package exports its @task, imported on first use: this file is also staged into the sandbox, where task.py
    # and Inspect are not (docs/CONTRACT.md).
    if name in __all__:
        from .task import optimize_llm_foundry

        return optimize_llm_foundry
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
