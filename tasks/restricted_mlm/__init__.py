"""Restricted Architecture MLM (METR `ai_rd_restricted_mlm`, README.md)."""

from rebench import export_task

__all__ = ["restricted_mlm"]
__getattr__ = export_task(__name__, "restricted_mlm")
