"""What a full-scale run needs of the GPU machine, checked before anything starts (`rebench preflight ENV`): the
NVIDIA driver new enough for the CUDA release of the image's torch, enough GPUs, enough memory on each, and the
host's CPUs and memory for the container's limits. Read from `nvidia-smi` on PATH, `os.cpu_count()` and
/proc/meminfo; every problem is one sentence that says what is there and what is needed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..spec.environment import EnvironmentSpec, full_image_module

# The CUDA release each pinned torch's PyPI wheel is built for (its NVIDIA wheels), and the oldest Linux driver each
# CUDA major release runs on (NVIDIA's CUDA compatibility tables: 12.x from 525.60.13, 13.x from 580.65.06).
TORCH_CUDA = {"2.13.0": "13.0", "2.3.1": "12.1"}
MINIMUM_DRIVER = {"12": "525.60.13", "13": "580.65.06"}
# The shared base's torch; an environment whose image holds others says so in its full_image.IMAGE_TORCH.
BASE_TORCH = "2.13.0"
# nvidia-smi reports MiB; a card sold as "80GB" shows a little less or more than 80e9 bytes (H100: 81559 MiB).
GPU_MEMORY_SLACK = 0.95


@dataclass(frozen=True)
class Gpu:
    name: str
    memory_mib: int
    driver: str


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", version))


def minimum_driver(environment: EnvironmentSpec) -> str:
    """The oldest driver that runs every CUDA release in the environment's full image."""
    torches = getattr(full_image_module(environment), "IMAGE_TORCH", (BASE_TORCH,))
    releases = [TORCH_CUDA[torch] for torch in torches]
    return max((MINIMUM_DRIVER[release.split(".")[0]] for release in releases), key=_version_tuple)


def required_gpu_memory_gb(environment: EnvironmentSpec) -> int | None:
    """The memory of the GPU kind the environment was measured on ("H100 80GB" → 80); None when it names none."""
    found = re.search(r"(\d+)\s*GB", environment.resources.gpu_kind)
    return int(found.group(1)) if found else None


def list_gpus() -> list[Gpu] | None:
    """The GPUs `nvidia-smi` lists (an empty list without nvidia-smi; None when it fails to answer)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        listing = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    gpus = []
    for line in listing.stdout.splitlines():
        fields = [field.strip() for field in line.split(",")]
        if len(fields) == 3 and fields[1].isdigit():
            gpus.append(Gpu(fields[0], int(fields[1]), fields[2]))
    return gpus


def host_memory_gb(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    try:
        found = re.search(r"^MemTotal:\s+(\d+) kB", meminfo.read_text(), re.MULTILINE)
    except OSError:
        return None
    return int(found.group(1)) * 1024 / 1e9 if found else None


def gpu_problems(environment: EnvironmentSpec) -> list[str]:
    """What this machine lacks for one full-scale sample of `environment` (empty: enough)."""
    resources = environment.resources
    problems = []
    cpus = os.cpu_count() or 0
    if cpus < resources.cpus:
        problems.append(f"{environment.name} gives its container {resources.cpus} CPUs; this machine has {cpus}")
    memory = host_memory_gb()
    if memory is not None and memory < resources.memory_gb:
        problems.append(
            f"{environment.name} gives its container {resources.memory_gb} GB of memory; this machine has {memory:.0f}"
        )
    if not resources.gpus:
        return problems
    gpus = list_gpus()
    if gpus is None:
        return [*problems, "nvidia-smi is there but did not answer: is the NVIDIA driver loaded?"]
    if len(gpus) < resources.gpus:
        listed = "no nvidia-smi on PATH (no NVIDIA driver)" if not gpus else f"nvidia-smi lists {len(gpus)}"
        problems.append(f"{environment.name} needs {resources.gpus} GPU(s) per sample; {listed}")
    if not gpus:
        return problems
    needed_driver = minimum_driver(environment)
    oldest = min((gpu.driver for gpu in gpus), key=_version_tuple)
    if _version_tuple(oldest) < _version_tuple(needed_driver):
        problems.append(
            f"NVIDIA driver {oldest} is older than {needed_driver}, the oldest that runs the CUDA release of "
            f"{environment.name}'s image: update the driver"
        )
    needed_gb = required_gpu_memory_gb(environment)
    if needed_gb is not None and len(gpus) >= resources.gpus:  # too few GPUs is said above
        needed_mib = needed_gb * 1e9 / 2**20 * GPU_MEMORY_SLACK
        small = [gpu for gpu in gpus if gpu.memory_mib < needed_mib]
        if len(gpus) - len(small) < resources.gpus:
            problems.append(
                f"{environment.name} was measured on {resources.gpus}× {resources.gpu_kind}; "
                f"{len(gpus) - len(small)} GPU(s) here have {needed_gb} GB or more "
                f"({', '.join(sorted({f'{gpu.name} {gpu.memory_mib} MiB' for gpu in gpus}))})"
            )
    return problems
