"""Finetune GPT-2 for QA (METR `ai_rd_nanogpt_chat_rl`, README.md)."""

from rebench import export_task

__all__ = ["finetune_target"]
__getattr__ = export_task(__name__, "finetune_target")
