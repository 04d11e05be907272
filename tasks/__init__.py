"""The `rebench` package: one folder per RE-Bench environment (installed from the repository's `tasks/`)."""

import importlib
from collections.abc import Callable
from pathlib import Path


def environment_names() -> list[str]:
    """Every environment, by registered name: the folders holding a `task.py` (docs/CONTRACT.md), found without
    importing any of them, so that the `rebench` command can offer them as choices at once."""
    return sorted(path.parent.name for path in Path(__file__).resolve().parent.glob("*/task.py"))


def export_task(package: str, task_name: str) -> Callable[[str], object]:
    """The module `__getattr__` with which an environment's `__init__.py` exports its @task, imported from `task.py`
    on first use: that `__init__.py` is also staged into the sandbox, where task.py and Inspect are not."""

    def exported(name: str) -> object:
        if name == task_name:
            return getattr(importlib.import_module(f"{package}.task"), task_name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return exported
