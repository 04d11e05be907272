"""Optimize LLM Foundry (METR `ai_rd_optimize_llm_foundry`, README.md)."""

from rebench import export_task

__all__ = ["optimize_llm_foundry"]
__getattr__ = export_task(__name__, "optimize_llm_foundry")
