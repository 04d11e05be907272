"""`rebench images build`: build environments' images (and their shared base) with a local engine."""

import argparse
import sys

from ..spec.scales import SCALES
from .arguments import Parser, add_environment


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    images = commands.add_parser("images", help="container images").add_subparsers(
        dest="images", required=True, metavar="COMMAND", parser_class=Parser
    )
    build = images.add_parser("build", help="build environments' images (and their shared base) with a local engine")
    add_environment(build, "environments", nargs="+")
    build.add_argument("--scale", choices=SCALES, default="full")
    build.set_defaults(run=run_build)


def run_build(args: argparse.Namespace) -> int:
    import subprocess

    from rebench.environments import ENVIRONMENTS

    from ..tools.images import build_image

    for name in args.environments:
        try:
            print(f"built {build_image(ENVIRONMENTS[name], args.scale)}")
        except RuntimeError as ex:  # what this machine lacks for a build, said in one sentence with the fix
            print(f"rebench images build {name}: {ex}", file=sys.stderr)
            return 1
        except subprocess.CalledProcessError as ex:
            failed = " ".join(ex.cmd[:2])
            print(f"rebench images build {name}: `{failed}` failed (exit {ex.returncode}), see above", file=sys.stderr)
            return 1
    return 0
