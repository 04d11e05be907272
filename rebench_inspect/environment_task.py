"""`@environment_task(ENVIRONMENT)`: an environment's `@task` with the common parameters written and documented once.

    @task
    @environment_task(ENVIRONMENT, scale_doc="`full` (default: ...) or `smoke` (...)")
    def toy_contract(common: CommonParameters, bonus: int = 0) -> Task:
        \"\"\"Toy: write the secret number into answer.txt.

        Args:
            bonus: ...
        \"\"\"
        return build_task(ENVIRONMENT, common, services=[...])

The decorated function's signature (which Inspect reads for `-T` and records in the log) is the common parameters
followed by the environment's own; its docstring gets the common parameters' documentation. The function itself
receives the common ones as one `CommonParameters` value. `@task` stays written in `task.py`, so
`inspect list tasks` (which parses source files for it) finds every environment.
"""

import functools
import inspect
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields

from inspect_ai import Task

from .environment import EnvironmentSpec

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

    def as_kwargs(self) -> dict[str, object]:
        return asdict(self)


def common_parameter_docs(environment: EnvironmentSpec, scale_doc: str | None = None) -> dict[str, str]:
    gpus = environment.resources.gpus
    hardware = f"needs {gpus} GPU{'s' if gpus != 1 else ''}" if gpus else "CPU only"
    visible = (
        "False gives the paper's hidden-score variant: the agent learns validity only."
        if environment.score_visible
        else "This environment never shows scores to the agent (spec): only False is accepted."
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
        signature = inspect.Signature(parameters, return_annotation=Task)

        @functools.wraps(function)
        def wrapper(**kwargs: object) -> Task:
            bound = signature.bind(**kwargs)
            bound.apply_defaults()
            common = CommonParameters(**{name: bound.arguments[name] for name in common_names})
            return function(common, **{p.name: bound.arguments[p.name] for p in own})

        wrapper.__signature__ = signature  # type: ignore[attr-defined]
        wrapper.__doc__ = _merge_docstring(function.__doc__ or "", common_parameter_docs(environment, scale_doc))
        return wrapper

    return decorate
