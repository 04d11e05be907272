"""Optimize a Kernel (METR `ai_rd_triton_cumsum`, README.md)."""

from rebench import export_task

__all__ = ["optimize_kernel"]
__getattr__ = export_task(__name__, "optimize_kernel")
