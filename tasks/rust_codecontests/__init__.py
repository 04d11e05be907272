"""Scaffolding for Rust Codecontest (METR `ai_rd_rust_codecontests_inference`, README.md)."""

from rebench import export_task

__all__ = ["rust_codecontests"]
__getattr__ = export_task(__name__, "rust_codecontests")
