"""An environment's listing in the Inspect Evals register: `tasks/<env>/eval.yaml` (docs/register.md).

The file holds what the register lists (title, description, paper, task and its sample count, hardware) and the
task's version in the register's `N-X` scheme, which the environment's Inspect task carries (`build_task`).
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

EVAL_YAML = "eval.yaml"
_VERSION = re.compile(r"(?P<comparability>[1-9][0-9]*)-(?P<interface>[A-Z]+)")


@dataclass(frozen=True)
class TaskVersion:
    """`N-X`: N counts the changes after which scores are no longer comparable with earlier runs (the Inspect task's
    `version`, recorded in every log); X (A, B, ...) counts changes to how the task is called (its parameters)."""

    comparability: int
    interface: str

    @property
    def full(self) -> str:
        return f"{self.comparability}-{self.interface}"

    def metadata(self) -> dict[str, int | str]:
        """The version's parts as task metadata, under the names the register's tooling reads."""
        return {
            "full_task_version": self.full,
            "task_comparability_version": self.comparability,
            "task_interface_version": self.interface,
        }


def parse_version(text: object) -> TaskVersion:
    """`"1-A"` → TaskVersion(1, "A"); anything else is a ValueError naming the scheme."""
    match = _VERSION.fullmatch(text) if isinstance(text, str) else None
    if match is None:
        raise ValueError(f"version must be N-X (a whole number from 1, a dash, capital letters: '1-A'), not {text!r}")
    return TaskVersion(int(match["comparability"]), match["interface"])


def read_eval_yaml(folder: Path) -> dict[str, Any]:
    """The environment folder's eval.yaml as a mapping; a missing or malformed file is a ValueError naming it."""
    path = folder / EVAL_YAML
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as ex:
        raise ValueError(f"{path}: unreadable ({ex})") from ex
    if not isinstance(data, dict):
        raise ValueError(f"{path}: not a mapping")
    return data


def task_version(folder: Path) -> TaskVersion:
    """The version the environment in `folder` declares in its eval.yaml."""
    return parse_version(read_eval_yaml(folder).get("version"))
