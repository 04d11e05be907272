"""`rebench list`: the environments with their titles, scales, GPUs and whether they run here."""

import argparse

from ..spec.scales import SCALES


def register(commands: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    listing = commands.add_parser("list", help="the environments: titles, scales, GPUs, whether they run here")
    listing.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from rebench.environments import ENVIRONMENTS

    from ..runtime.sandbox import local_problems

    missing = {name: local_problems(environment) for name, environment in ENVIRONMENTS.items()}
    print(f"{'name':<22}{'title':<36}{'scales':<13}{'GPUs (full)':<16}status here")
    for name, environment in ENVIRONMENTS.items():
        gpus = environment.resources.gpus
        gpu_text = f"{gpus}x {environment.resources.gpu_kind}" if gpus else "none"
        status = "not ready for local runs (below)" if missing[name] else "ready for local smoke runs"
        scales = ", ".join(scale for scale in SCALES if scale in environment.anchors)
        print(f"{name:<22}{environment.paper_name:<36}{scales:<13}{gpu_text:<16}{status}")
    for name, problems in missing.items():
        for problem in problems:
            print(f"\n{name}: {problem}")
    print("\nRun one with `inspect eval rebench/NAME`; `rebench demo` runs every one ready here at smoke scale.")
    return 0
