"""Scaling Law Experiment (METR `ai_rd_small_scaling_law`, README.md)."""

from rebench import export_task

__all__ = ["scaling_law"]
__getattr__ = export_task(__name__, "scaling_law")
