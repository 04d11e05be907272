"""Fix Embedding (METR `ai_rd_fix_embedding`, README.md)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import fix_embedding

__all__ = ["fix_embedding"]


def __getattr__(name: str) -> object:
    # The package exports its @task, imported on first use: this file is also staged into the sandbox, where task.py
    # and Inspect are not (docs/CONTRACT.md).
    if name in __all__:
        from .task import fix_embedding

        return fix_embedding
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
