"""`rebench preflight`: what a Docker (or local) run of an environment is missing on this machine."""

import argparse

from ..spec.scales import SCALES
from .arguments import add_environment


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    preflight = commands.add_parser("preflight", help="say what a Docker (or local) run of an environment is missing")
    add_environment(preflight)
    preflight.add_argument("--scale", choices=SCALES, default="full")
    preflight.add_argument(
        "--sandbox", choices=("docker", "local"), default="docker", help="local: software the host itself needs"
    )
    preflight.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rebench.environments import ENVIRONMENTS

    from ..runtime.sandbox import docker_problems, local_problems

    environment = ENVIRONMENTS[args.environment]
    if args.sandbox == "local":
        problems, kind = local_problems(environment), "local-sandbox run"
    else:
        problems, kind = docker_problems(environment.at(args.scale)), "Docker run"
    for problem in problems:
        print(f"- {problem}")
    print(f"ready for a {kind}" if not problems else f"{len(problems)} problem(s) for a {kind}")
    return 1 if problems else 0
