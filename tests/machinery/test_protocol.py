"""The host side of the protocol: environments are discovered, every task takes the common parameters, and each
environment's inner time limits fit inside the host's."""

import ast
import inspect
from dataclasses import fields
from pathlib import Path

import pytest
from inspect_ai._eval.list import list_tasks

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.environment_task import CommonParameters

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


def declared_step_limits(environment) -> dict[str, dict[str, float]] | None:
    """`TIMEOUTS_S` of the environment's scoring/score.py, read without importing it."""
    tree = ast.parse((environment.sandbox_dir / "score.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "TIMEOUTS_S" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


# Converted to sandbox_lib.main with declared step limits; the others declare theirs when they adopt it.
DECLARING = ["finetune_target", "fix_embedding", "optimize_llm_foundry", "restricted_mlm", "scaling_law"]


@pytest.mark.parametrize("name", DECLARING)
def test_inner_time_limits_fit_inside_the_hosts(name):
    environment = ENVIRONMENTS[name]
    limits = declared_step_limits(environment)
    assert limits is not None, f"{name}/scoring/score.py declares no TIMEOUTS_S"
    for scale, steps in limits.items():
        assert sum(steps.values()) <= environment.scoring_timeout_s[scale], (scale, steps)
