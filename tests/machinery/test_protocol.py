"""The host side of the protocol: environments are discovered and every task takes the common parameters (each
environment's inner time limits: tests/contract/test_environments.py)."""

import inspect
from dataclasses import fields
from pathlib import Path

import pytest
from inspect_ai._eval.list import list_tasks

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.runtime.environment_task import CommonParameters

TASKS_DIR = Path(__file__).resolve().parents[2] / "tasks"
COMMON = [field.name for field in fields(CommonParameters)]


def test_every_task_folder_is_an_environment_and_nothing_else_is():
    folders = sorted(path.parent.name for path in TASKS_DIR.glob("*/task.py"))
    assert folders and sorted(ENVIRONMENTS) == folders
    assert all(ENVIRONMENTS[name].name == name for name in folders)


def test_inspect_list_tasks_finds_every_environment():
    listed = {info.name for info in list_tasks([], root_dir=TASKS_DIR)}
    assert set(ENVIRONMENTS) <= listed


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_every_task_takes_the_common_parameters_first(name):
    parameters = list(inspect.signature(TASKS[name]).parameters)
    assert parameters[: len(COMMON)] == COMMON
