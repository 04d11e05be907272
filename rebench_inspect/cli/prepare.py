"""`rebench prepare`: warm the cache of prepared assets for environments, and list what the cache holds."""

import argparse
import sys

from .arguments import add_environment


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    prepare = commands.add_parser("prepare", help="warm the cache of prepared assets and list what it holds")
    add_environment(prepare, "environments", "default: none, only list the cache; ", nargs="*")
    prepare.add_argument("--scale", choices=("smoke",), default="smoke", help="full-scale assets are built into images")
    prepare.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rebench.environments import ENVIRONMENTS

    from ..runtime.sandbox import local_problems
    from ..tools.prepared import print_listing, sweep_leftovers, warm
    from .score import local_task

    failed = False
    for name in args.environments:
        if missing := local_problems(ENVIRONMENTS[name]):
            print(f"rebench prepare {name}: not ready for local runs: {'; '.join(missing)}", file=sys.stderr)
            failed = True
            continue
        print(f"{name}: preparing at {args.scale} scale and scoring the starting solution once…", flush=True)
        result = warm(ENVIRONMENTS[name].at(args.scale), local_task(name, args.scale))
        verdict = "valid" if result["valid"] else "INVALID"
        print(f"{name}: prepared in {result['seconds']:.0f} s (starting solution {verdict})")
    sweep_leftovers()
    print_listing()
    return 1 if failed else 0
