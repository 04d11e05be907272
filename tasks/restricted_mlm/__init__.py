"""Restricted Architecture MLM (METR `ai_rd_restricted_mlm`, README.md)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import restricted_mlm

__all__ = ["restricted_mlm"]


def __getattr__(name: str) -> object:
    # The package exports its @task, imported on first use: this file is also staged into the sandbox, where task.py
    # and Inspect are not (docs/CONTRACT.md).
    if name in __all__:
        from .task import restricted_mlm

        return restricted_mlm
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
