"""`@environment_task(ENVIRONMENT)`: an environment's `@task` with the common parameters written and documented once.

    @task
    @environment_task(ENVIRONMENT, scale_doc="`full` (default: ...) or `smoke` (...)")
    def toy_contract(common: CommonParameters, bonus: int = 0) -> Task:
        \"\"\"Toy: write the secret number into answer.txt.

        Args:
            bonus: ...
        \"\"\"
        return build_task(resolve(ENVIRONMENT, common), common, services=[...])

The decorated function's signature (which Inspect reads for `-T` and records in the log) is the common parameters
followed by the environment's own; its docstring gets the common parameters' documentation. The function itself
receives the common ones as one `CommonParameters` value. `@task` stays written in `task.py`, so
`inspect list tasks` (which parses source files for it) finds every environment.
"""

import functools
import inspect
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from typing import TypeVar, cast

from inspect_ai import Task
from inspect_ai._util.error import PrerequisiteError
from inspect_ai._util.package import get_installed_package_name

from ..spec.choices import not_one_of
from ..spec.environment import SCALES, EnvironmentSpec, ResolvedEnvironment, Scale
from .checkpoints import DEFAULT_CHECKPOINT_MINUTES
from .sandbox import SANDBOX_TYPES

# The signature's catch-all: Inspect hands a task every `-T` name only when the task takes **kwargs (otherwise it
# drops unknown names with a warning and the run starts with defaults); the task refuses them itself.
UNDECLARED = "undeclared_parameters"

NAMESPACE = "rebench"  # the import package: tasks are `rebench/<env>`
Registered = TypeVar("Registered", bound=Callable)

# The paper's human budget; its agent budgets (0.5 h, 2 h) are one `-T time_budget_hours=` away.
DEFAULT_TIME_BUDGET_HOURS = 8.0


@dataclass(frozen=True)
class CommonParameters:
    """The parameters every rebench task takes (values arrive YAML-typed from `-T`; `build_task` checks them)."""

    scale: str = "full"
    time_budget_hours: float = DEFAULT_TIME_BUDGET_HOURS
    token_limit: int | None = None
    message_limit: int | None = None
    sandbox: str = "docker"
    agent_user: str | None = "agent"
    score_visible: bool | None = None
    epochs: int = 1
    anchors: str | None = None
    checkpoint_minutes: float = DEFAULT_CHECKPOINT_MINUTES

    def as_kwargs(self) -> dict[str, object]:
        return asdict(self)


def in_rebench_namespace(function: Registered) -> Registered:
    """Put a `@task` or `@solver` of the `rebench` package under `rebench/` however the package is installed.

    Inspect namespaces what a package registers only when the package lies in site-packages or is an editable install
    of a distribution named like it. This distribution is `inspect-rebench` (PyPI's `rebench` is another project), so
    in an editable install (a clone's `pip install -e .`) Inspect would register a bare `toy_contract` and
    `inspect eval rebench/toy_contract` would find nothing. Inspect's decorators take the name from `__name__`.
    A task file loaded by path (`inspect eval tasks/toy_contract/task.py`) is not in the package: left as it is.
    """
    if function.__module__.split(".")[0] == NAMESPACE and get_installed_package_name(function) is None:
        function.__name__ = f"{NAMESPACE}/{function.__name__}"
    return function


class TaskParameterError(PrerequisiteError, ValueError):
    """A task parameter a run cannot start with; one sentence that names it and says what is allowed. Inspect's
    command line prints a `PrerequisiteError` as its message alone, without a traceback (Inspect exports no public
    name for it); a `ValueError` to Python callers."""

    def __init__(self, message: str) -> None:
        PrerequisiteError.__init__(self, message)
        ValueError.__init__(self, message)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def checked_parameters(environment: EnvironmentSpec, parameters: CommonParameters) -> CommonParameters:
    """The common parameters as the task builder uses them (`-T` values arrive YAML-typed: `2` is an int), or a
    `TaskParameterError` naming the first bad one and its allowed values."""

    def refuse(name: str, allowed: str) -> TaskParameterError:
        given = getattr(parameters, name)
        return TaskParameterError(f"rebench/{environment.name}: {name} must be {allowed}, not {given!r}")

    if parameters.scale not in SCALES:
        raise refuse("scale", " or ".join(SCALES))
    if not _is_number(parameters.time_budget_hours) or parameters.time_budget_hours <= 0:
        raise refuse("time_budget_hours", "a positive number of hours (e.g. 0.5, 2 or 8)")
    for limit in ("token_limit", "message_limit"):
        if getattr(parameters, limit) is not None and not _is_count(getattr(parameters, limit)):
            raise refuse(limit, "a whole number of at least 1 (or left out: no limit)")
    if parameters.sandbox not in SANDBOX_TYPES:
        raise refuse("sandbox", ", ".join(SANDBOX_TYPES))
    if parameters.agent_user is not None and not isinstance(parameters.agent_user, str):
        raise refuse("agent_user", "a user name of the image")
    if parameters.score_visible is not None and not isinstance(parameters.score_visible, bool):
        raise refuse("score_visible", "true or false")
    if parameters.score_visible and not environment.score_visible:
        raise refuse("score_visible", f"false: {environment.name} never shows scores to the agent, as in the original")
    if not _is_count(parameters.epochs):
        raise refuse("epochs", "a whole number of at least 1")
    if parameters.anchors is not None and not isinstance(parameters.anchors, str):
        raise refuse("anchors", "the path of an anchors file written by `rebench calibrate`")
    if not _is_number(parameters.checkpoint_minutes) or parameters.checkpoint_minutes < 0:
        raise refuse("checkpoint_minutes", "a number of minutes (e.g. 30), or 0 for no checkpoints")
    return replace(
        parameters,
        time_budget_hours=float(parameters.time_budget_hours),
        checkpoint_minutes=float(parameters.checkpoint_minutes),
    )


def resolve(environment: EnvironmentSpec, parameters: CommonParameters) -> ResolvedEnvironment:
    """The environment at the run's scale with the run's anchors file applied: what a task function hands
    `build_task` and anything else of the run that depends on the scale (resolved once per run)."""
    parameters = checked_parameters(environment, parameters)
    try:
        return environment.at(cast(Scale, parameters.scale), parameters.anchors or None)
    except (OSError, ValueError, KeyError) as ex:
        raise TaskParameterError(
            f"rebench/{environment.name}: anchors file {parameters.anchors!r} unusable: {ex}"
        ) from ex


def common_parameter_docs(environment: EnvironmentSpec, scale_doc: str | None = None) -> dict[str, str]:
    gpus = environment.resources.gpus
    hardware = f"needs {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "CPU only"
    visible = (
        "False gives the paper's hidden-score variant: the agent learns validity only."
        if environment.score_visible
        else "This environment never shows scores to the agent, as in the original: only False is accepted."
    )
    return {
        "scale": scale_doc
        or "`full` (default: real models and data, the paper's hardware and anchors) or `smoke` (same code on a CPU "
        "with tiny models and generated data, CPU-measured anchors; for pipeline checks only).",
        "time_budget_hours": "Working-time budget (Inspect `working_limit`); the paper's humans had 8, its agents "
        "0.5, 2 and 8. A wall-clock `time_limit` of 1.5× is added as a safety net.",
        "token_limit": "Optional cap on the agent's tokens.",
        "message_limit": "Optional cap on the agent's messages.",
        "sandbox": f"`docker` (default, {hardware}), `k8s`, or `local` (smoke runs without Docker).",
        "agent_user": "Unprivileged user the agent's tools run as in containers (the local sandbox ignores it).",
        "score_visible": f"Default: the environment's setting ({environment.score_visible}). {visible}",
        "epochs": "Runs per environment; scores are reduced by mean and max (best-of-k).",
        "anchors": "An anchors file written by `rebench calibrate` for this environment and scale: its anchors "
        "replace the built-in ones, and every score's metadata names the file.",
        "checkpoint_minutes": "Docker and k8s runs checkpoint the agent's home and the score log every this many "
        "minutes and after each scored turn; `inspect eval-retry` resumes from the last one. 0: no checkpoints.",
    }


def _merge_docstring(own: str, common_docs: dict[str, str]) -> str:
    """The function's summary, then `Args:` with the common parameters followed by the function's own entries."""
    text = inspect.cleandoc(own or "")
    summary, _, own_args = text.partition("\nArgs:\n")
    lines = [summary.rstrip(), "", "Args:"]
    lines += [f"    {name}: {doc}" for name, doc in common_docs.items()]
    if own_args.strip():
        lines += [line if line.startswith("    ") else f"    {line}" for line in own_args.rstrip().splitlines()]
    return "\n".join(lines)


def environment_task(
    environment: EnvironmentSpec, *, scale_doc: str | None = None
) -> Callable[[Callable[..., Task]], Callable[..., Task]]:
    common_names = [field.name for field in fields(CommonParameters)]
    defaults = CommonParameters()

    def decorate(function: Callable[..., Task]) -> Callable[..., Task]:
        own = list(inspect.signature(function).parameters.values())
        if not own or own[0].name != "common":
            raise TypeError(f"{function.__name__}: the first parameter must be `common: CommonParameters`")
        own = own[1:]
        clash = {parameter.name for parameter in own} & set(common_names)
        if clash:
            raise TypeError(f"{function.__name__}: {sorted(clash)} are common parameters already")
        annotations = {field.name: field.type for field in fields(CommonParameters)}
        parameters = [
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=getattr(defaults, name), annotation=annotations[name]
            )
            for name in common_names
        ] + [parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY) for parameter in own]
        declared = [parameter.name for parameter in parameters]
        signature = inspect.Signature(
            [*parameters, inspect.Parameter(UNDECLARED, inspect.Parameter.VAR_KEYWORD)], return_annotation=Task
        )

        @functools.wraps(function)
        def wrapper(**kwargs: object) -> Task:
            if undeclared := [name for name in kwargs if name not in declared]:
                raise TaskParameterError(
                    f"rebench/{environment.name}: {not_one_of('parameter', undeclared[0], declared)}"
                )
            bound = signature.bind(**kwargs)
            bound.apply_defaults()
            common = CommonParameters(**{name: bound.arguments[name] for name in common_names})
            return function(checked_parameters(environment, common), **{p.name: bound.arguments[p.name] for p in own})

        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        wrapper.__doc__ = _merge_docstring(function.__doc__ or "", common_parameter_docs(environment, scale_doc))
        return in_rebench_namespace(wrapper)

    return decorate
