"""The `rebench` package: one folder per RE-Bench environment (installed from the repository's `tasks/`)."""

from pathlib import Path


def environment_names() -> list[str]:
    """Every environment, by registered name: the folders holding a `task.py` (docs/CONTRACT.md), found without
    importing any of them, so that the `rebench` command can offer them as choices at once."""
    return sorted(path.parent.name for path in Path(__file__).resolve().parent.glob("*/task.py"))
