"""Scaling Law Experiment (METR `ai_rd_small_scaling_law`, README.md)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import scaling_law

__all__ = ["scaling_law"]


def __getattr__(name: str) -> object:
    # The package exports its @task, imported on first use: this file is also staged into the sandbox, where task.py
    # and Inspect are not (docs/CONTRACT.md).
    if name in __all__:
        from .task import scaling_law

        return scaling_law
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
