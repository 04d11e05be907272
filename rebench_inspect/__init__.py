"""Host-side machinery shared by every rebench environment (task builder, scoring, tools, sandboxes, CLI).

The names below load on first use: the `rebench` command imports this package, and its `--help` must not wait for
Inspect or pydantic.
"""

from importlib import import_module
from typing import Any

# The name pip knows this project by (PyPI's `rebench` is another project); the import package stays `rebench`.
DISTRIBUTION = "inspect-rebench"

_LAZY = {
    "Anchors": "environment",
    "EnvironmentSpec": "environment",
    "FinalRule": "environment",
    "Resources": "environment",
    "Transform": "environment",
    "build_task": "task",
}

__all__ = ["DISTRIBUTION", *_LAZY]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{_LAZY[name]}", __name__), name)
