"""What one Docker call costs the machine: the CPU time (all processes, from /proc/stat) and the wall time of each kind
of call a Docker sample makes, in a container started as Inspect's Docker sandbox starts one (a Compose project).

Inspect's Docker sandbox runs every `exec` of a sample (the harness's commands, the agent's tools, a sandbox service's
polls) as one `docker compose exec`, and reads a file with `docker compose cp`; this prints what each costs beside a
plain `docker exec`, so a count of calls (e.g. a wrapper that logs them) turns into CPU-seconds. Run it on an otherwise
idle machine with the engine started (`bash sandboxes/engine.sh start`) and the image built.

    python benchmarks/docker_call_cost.py [--image TAG] [-n CALLS]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from timing import machine

from rebench_inspect.tools.images import base_tag

PROJECT = "rebench-docker-call-cost"


def busy_seconds() -> float:
    """CPU-seconds the whole machine has spent busy since boot (every field of /proc/stat's cpu line but idle and
    iowait)."""
    fields = [int(value) for value in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def measured(call: Callable[[], None], calls: int) -> tuple[float, float]:
    """Mean CPU-seconds and wall seconds per call of `call`."""
    busy, started = busy_seconds(), time.perf_counter()
    for _ in range(calls):
        call()
    return (busy_seconds() - busy) / calls, (time.perf_counter() - started) / calls


def run(*command: str) -> None:
    completed = subprocess.run(command, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        sys.exit(f"{' '.join(command)} failed (exit {completed.returncode}): {completed.stderr[-2000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default=base_tag("smoke"), help="image to start (default: the smoke base image)")
    parser.add_argument("-n", "--calls", type=int, default=30, help="calls of each kind (default 30)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rebench-docker-cost-") as folder:
        compose_file = Path(folder) / "compose.yaml"
        compose_file.write_text(
            f"services:\n  default:\n    image: {args.image}\n    command: [sleep, infinity]\n    network_mode: none\n"
        )
        compose = ["docker", "compose", "--project-name", PROJECT, "-f", str(compose_file)]
        run(*compose, "up", "--detach", "--wait")
        try:
            container = subprocess.run(
                [*compose, "ps", "-q", "default"], capture_output=True, text=True, check=True
            ).stdout.strip()
            kinds = {
                "docker compose exec (Inspect's exec)": lambda: run(*compose, "exec", "default", "true"),
                "docker compose cp (Inspect's read_file)": lambda: run(*compose, "cp", "default:/etc/hostname", "-"),
                "docker exec": lambda: run("docker", "exec", container, "true"),
            }
            print(f"Machine: {machine()}; image {args.image}; {args.calls} calls of each kind")
            print("| call | CPU per call, s | wall per call, s |\n| --- | --- | --- |")
            for name, call in kinds.items():
                cpu, wall = measured(call, args.calls)
                print(f"| {name} | {cpu:.3f} | {wall:.3f} |")
        finally:
            run(*compose, "down", "--timeout", "1")


if __name__ == "__main__":
    main()
