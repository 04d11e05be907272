"""Optimize a Kernel (METR `ai_rd_triton_cumsum`, README.md)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import optimize_kernel

__all__ = ["optimize_kernel"]


def __getattr__(name: str) -> object:
    # The package exports its @task, imported on first use: this file is also staged into the sandbox, where task.py
    # and Inspect are not (docs/CONTRACT.md).
    if name in __all__:
        from .task import optimize_kernel

        return optimize_kernel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
