"""Fix Embedding (METR `ai_rd_fix_embedding`, README.md)."""

from rebench import export_task

__all__ = ["fix_embedding"]
__getattr__ = export_task(__name__, "fix_embedding")
