"""`rebench images build` and `rebench images rehearse`: build environments' images (and their shared base) with a
local engine; rehearse a full-scale build on a machine without a GPU or an image registry."""

import argparse
import sys

from ..spec.scales import SCALES
from .arguments import Parser, add_environment

BASE_IMAGE_HELP = "parent of the shared base image (default: a Debian made here with debootstrap, no registry needed)"
FLASH_ATTN_HELP = (
    "LLM Foundry's stack at full scale: flash-attn's prebuilt wheel (a file or URL; PyPI has none), or `none` to "
    "leave it out"
)


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    images = commands.add_parser("images", help="container images").add_subparsers(
        dest="images", required=True, metavar="COMMAND", parser_class=Parser
    )
    build = images.add_parser("build", help="build environments' images (and their shared base) with a local engine")
    add_environment(build, "environments", nargs="+")
    build.add_argument("--scale", choices=SCALES, default="full")
    build.add_argument("--base-image", default=None, help=BASE_IMAGE_HELP)
    build.add_argument("--flash-attn-wheel", default=None, help=FLASH_ATTN_HELP)
    build.set_defaults(run=run_build)
    rehearse = images.add_parser(
        "rehearse",
        help="build an environment's full image with a local stand-in for the Hugging Face hub, then check it "
        "without a GPU (versions, CUDA libraries, users and folders, the scoring program)",
    )
    add_environment(rehearse, "environments", nargs="+")
    rehearse.add_argument("--base-image", default=None, help=BASE_IMAGE_HELP)
    rehearse.add_argument("--flash-attn-wheel", default=None, help=FLASH_ATTN_HELP)
    rehearse.set_defaults(run=run_rehearse)


def _build_failure(name: str, ex: Exception) -> int:
    import subprocess

    if isinstance(ex, subprocess.CalledProcessError):
        failed = " ".join(str(part) for part in ex.cmd[:2])
        print(f"rebench images {name}: `{failed}` failed (exit {ex.returncode}), see above", file=sys.stderr)
    else:  # what this machine lacks for a build, said in one sentence with the fix
        print(f"rebench images {name}: {ex}", file=sys.stderr)
    return 1


def run_build(args: argparse.Namespace) -> int:
    import subprocess

    from rebench.environments import ENVIRONMENTS

    from ..tools.images import build_image

    for name in args.environments:
        try:
            tag = build_image(
                ENVIRONMENTS[name], args.scale, base_image=args.base_image, flash_attn_wheel=args.flash_attn_wheel
            )
            print(f"built {tag}")
        except (RuntimeError, subprocess.CalledProcessError) as ex:
            return _build_failure(f"build {name}", ex)
    return 0


def run_rehearse(args: argparse.Namespace) -> int:
    import subprocess

    from rebench.environments import ENVIRONMENTS

    from ..tools.rehearsal import rehearse

    failed = 0
    for name in args.environments:
        try:
            rehearsal = rehearse(ENVIRONMENTS[name], base_image=args.base_image, flash_attn_wheel=args.flash_attn_wheel)
        except (RuntimeError, subprocess.CalledProcessError) as ex:
            return _build_failure(f"rehearse {name}", ex)
        print(
            f"{name}: built {rehearsal.tag} in {rehearsal.build_s / 60:.1f} min; image {rehearsal.image_gb:.1f} GB "
            f"(shared base {rehearsal.base_gb:.1f} GB); {len(rehearsal.hub_requests)} requests to the stand-in hub"
        )
        if rehearsal.hub_misses:  # optional files the client probes for; where preparation failed, what it lacked
            print(f"  the stand-in hub answered 404 to: {', '.join(rehearsal.hub_misses)}")
        for problem in rehearsal.check.problems:
            print(f"  PROBLEM {problem}")
        print(f"{name}: image check {'FAILED' if rehearsal.check.problems else 'passed'}")
        failed += bool(rehearsal.check.problems)
    return 1 if failed else 0
