"""Finetune GPT-2 for QA (METR `ai_rd_nanogpt_chat_rl`, README.md)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import finetune_target

__all__ = ["finetune_target"]


def __getattr__(name: str) -> object:
    # The package exports its @task, imported on first use: this file is also staged into the sandbox, where task.py
    # and Inspect are not (docs/CONTRACT.md).
    if name in __all__:
        from .task import finetune_target

        return finetune_target
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
