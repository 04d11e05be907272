"""`rebench score`: score a workspace directory with the environment's scoring program, outside any eval."""

import argparse
import json
from typing import TYPE_CHECKING

from ..spec.choices import not_one_of
from ..spec.scales import SCALES
from .arguments import CommandLineError, add_environment, existing_directory, existing_file, role_assignment

if TYPE_CHECKING:
    from inspect_ai import Task


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    score = commands.add_parser("score", help="score a workspace directory with the environment's scoring program")
    add_environment(score)
    score.add_argument(
        "workspace", nargs="?", type=existing_directory, help="default: the environment's starting workspace"
    )
    score.add_argument("--scale", choices=SCALES, default="smoke")
    score.add_argument(
        "--model-role",
        action="append",
        default=[],
        type=role_assignment,
        metavar="ROLE=MODEL",
        help="model for a role the environment's services use (e.g. scaffold=openai/gpt-3.5-turbo-0125)",
    )
    score.add_argument(
        "--anchors",
        metavar="FILE",
        type=existing_file,
        help="an anchors file (as `-T anchors=FILE`; written by `rebench calibrate`): normalise with it. At smoke "
        "scale a timed environment otherwise measures its anchors on this machine first, at every call",
    )
    score.add_argument(
        "--log-dir", help="keep the eval log of this scoring there (its transcript times each step); default: none kept"
    )
    score.set_defaults(run=run)


def local_task(name: str, scale: str, anchors: str | None = None) -> "Task":
    """The environment's own task on the local sandbox (its services, model roles and instruction fields): what
    `rebench score` and `rebench prepare` score with."""
    from rebench.environments import TASKS

    return TASKS[name](scale=scale, sandbox="local", agent_user=None, anchors=anchors)


def run(args: argparse.Namespace) -> int:
    from rebench.environments import ENVIRONMENTS

    from ..runtime.environment_task import TaskParameterError
    from ..runtime.workspace_score import score_workspace

    environment = ENVIRONMENTS[args.environment]
    try:
        environment_task = local_task(environment.name, args.scale, args.anchors)
    except TaskParameterError as ex:  # an anchors file for another environment or scale, or not one at all
        raise CommandLineError(f"--anchors: {ex}") from None
    roles = dict(args.model_role)
    if unknown := sorted(set(roles) - set(environment_task.model_roles or {})):
        known = sorted(environment_task.model_roles or {})
        raise CommandLineError(
            f"--model-role: {not_one_of('model role', unknown[0], known)}"
            if known
            else f"--model-role: {environment.name} uses no model roles"
        )
    resolved = environment.at(args.scale, args.anchors)
    result = score_workspace(resolved, args.workspace, environment_task, roles, log_dir=args.log_dir)
    print(json.dumps(result, indent=2))
    return 0
