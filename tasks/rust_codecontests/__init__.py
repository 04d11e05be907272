"""Scaffolding for Rust Codecontest (METR `ai_rd_rust_codecontests_inference`, README.md)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .task import rust_codecontests

__all__ = ["rust_codecontests"]


def __getattr__(name: str) -> object:
    # The package exports its @task, imported on first use: this file is also staged into the sandbox, where task.py
    # and Inspect are not (docs/CONTRACT.md).
    if name in __all__:
        from .task import rust_codecontests

        return rust_codecontests
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
