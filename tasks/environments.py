"""Every implemented environment, by registered name, discovered from the folders `tasks/<name>/task.py`.

There is no hand-kept list: an environment exists when its folder has a `task.py` defining `ENVIRONMENT` (an
`EnvironmentSpec` whose name is the folder's) and a `@task` function of that name (docs/CONTRACT.md).
"""

import importlib
from collections.abc import Callable
from types import ModuleType

from inspect_ai import Task

from rebench_inspect import EnvironmentSpec

from . import environment_names


def _task_modules() -> list[ModuleType]:
    return [importlib.import_module(f"{__package__}.{folder}.task") for folder in environment_names()]


_MODULES = _task_modules()
ENVIRONMENTS: dict[str, EnvironmentSpec] = {module.ENVIRONMENT.name: module.ENVIRONMENT for module in _MODULES}
TASKS: dict[str, Callable[..., Task]] = {
    module.ENVIRONMENT.name: getattr(module, module.ENVIRONMENT.name) for module in _MODULES
}


def environment_named(name: str) -> EnvironmentSpec:
    try:
        return ENVIRONMENTS[name]
    except KeyError:
        raise ValueError(f"unknown environment {name!r}; implemented: {', '.join(ENVIRONMENTS)}") from None
