"""Sandbox specs (Docker, k8s, local), generated from each environment's `Resources` and the scale.

No environment writes a compose file or Helm values by hand: the Docker sandbox's compose file and the k8s sandbox's
values file are written here, under the cache root, both from the same facts. An environment's
`sandboxes/<name>/` folder holds only its Dockerfile and requirements.
"""

import hashlib
import json
import logging
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Any, Literal

import yaml
from inspect_ai.util import ComposeConfig, SandboxEnvironmentSpec

from ..spec.environment import EnvironmentSpec, ResolvedEnvironment, Scale
from .layout import CONTAINER_HOME

logger = logging.getLogger(__name__)

SandboxType = Literal["docker", "k8s", "local"]
SANDBOX_TYPES: tuple[str, ...] = ("docker", "k8s", "local")

IMAGE_REGISTRY = "ghcr.io/rebench"
IMAGE_VERSION = "0.1.0"
AGENT_WORKSPACE = f"{CONTAINER_HOME}/workspace"
# The service scoring programs run in when the environment scores apart from the agent (`isolated_scoring`).
SCORING_SERVICE = "scoring"
KEEP_ALIVE = ["tail", "-f", "/dev/null"]

# Users besides the agent's own and its `agent_extra_users` that run the agent's code in its container while the
# agent's processes live on: scoring's runner (`sandbox_lib.RUNNER_USER`) where the image has one.
SCORING_RUN_AS_USERS = 1
# The temporary folders the agent user may write, executable (compilers and torch.compile use /tmp). Its home is
# the container's disk, which only the engine's storage quota can cap (docs/security-model.md); setup closes the image's
# world-writable lock folder, which no task needs.
TEMP_DIRS = ("/tmp", "/var/tmp")
LOCK_DIR = "/run/lock"

# k8s defaults that match the NVIDIA GPU operator; each can be changed per run with these environment variables.
# The chart reads the runtime class name "CLUSTER_DEFAULT" as "set none".
K8S_RUNTIME_CLASS_VARIABLE = "REBENCH_K8S_RUNTIME_CLASS"
K8S_NODE_SELECTOR_VARIABLE = "REBENCH_K8S_NODE_SELECTOR"  # a JSON object
DEFAULT_GPU_RUNTIME_CLASS = "nvidia"
DEFAULT_GPU_NODE_SELECTOR = {"nvidia.com/gpu.present": "true"}


def sandbox_folder(environment_name: str) -> Path:
    """The environment's image definition (Dockerfile, requirements.txt)."""
    return Path(str(files("rebench_inspect.sandboxes"))) / environment_name


def image_tag(environment_name: str, scale: Scale) -> str:
    """The tag says the scale: smoke images are CPU-only with smoke assets, full ones CUDA with full assets."""
    return f"{IMAGE_REGISTRY}/{environment_name}:{IMAGE_VERSION}-{scale}"


def processes_per_user(environment: ResolvedEnvironment) -> int:
    """The processes (and threads) each non-root user may have (RLIMIT_NPROC), so that every user who can run the
    agent's code, all at their limit together, still leave root its `root_pids`: an agent that holds every slot it
    can get cannot keep the harness from stopping it and scoring. Root is exempt from the limit. The kernel counts a
    uid's processes across the host (containers share the host's user namespace), so samples on one host whose
    agents have the same uid share this number; docs/security-model.md says what that means for concurrent samples."""
    limits = environment.container_limits
    users = 1 + len(environment.spec.agent_extra_users) + SCORING_RUN_AS_USERS
    return (limits.pids - limits.root_pids) // users


# Message queues hold little memory each, but their default counts (32,000 System V queues of 16 KiB) would let the
# agent pin half a gigabyte that no process shows.
SYSV_MESSAGE_QUEUES, SYSV_QUEUE_BYTES, SYSV_SHM_SEGMENTS, POSIX_MESSAGE_QUEUES = 32, 64 * 1024, 256, 32
PAGE_BYTES = 4096  # kernel.shmall counts pages; with larger pages (some arm64 kernels) the cap is looser


def ipc_sysctls(environment: ResolvedEnvironment) -> dict[str, str]:
    """The container's IPC namespace capped (Docker accepts these for a private IPC namespace): System V shared
    memory is freed once no process has it attached (`shm_rmid_forced`, so no segment outlives its processes) and
    holds at most `sysv_shm_mb` meanwhile; System V and POSIX message queues are few."""
    shm_bytes = environment.container_limits.sysv_shm_mb * 1024**2
    return {
        "kernel.shm_rmid_forced": "1",
        "kernel.shmmax": str(shm_bytes),
        "kernel.shmall": str(shm_bytes // PAGE_BYTES),
        "kernel.shmmni": str(SYSV_SHM_SEGMENTS),
        "kernel.msgmni": str(SYSV_MESSAGE_QUEUES),
        "kernel.msgmnb": str(SYSV_QUEUE_BYTES),
        "fs.mqueue.queues_max": str(POSIX_MESSAGE_QUEUES),
    }


def compose_service(environment: ResolvedEnvironment) -> dict[str, Any]:
    """The `default` service of the Docker sandbox. No network, root as the default user (scorers run as root),
    the scale's `CONTAINER_LIMITS` (with `processes_per_user` for every other user), and no privilege gained through
    a setuid program unless the agent needs one."""
    limits, resources = environment.container_limits, environment.resources
    service: dict[str, Any] = {
        "image": image_tag(environment.name, environment.scale),
        "init": True,  # reaps what the agent's processes leave behind
        "command": KEEP_ALIVE,
        "network_mode": "none",  # a custom compose replaces Inspect's default isolation
        "working_dir": AGENT_WORKSPACE,
        "pids_limit": limits.pids,
        "ulimits": {"nproc": processes_per_user(environment)},  # root is exempt: its `root_pids` stay free
        "tmpfs": [f"{folder}:size={limits.temp_gb}g,mode=1777,exec" for folder in TEMP_DIRS],
        "shm_size": f"{limits.shm_gb}g",
        "sysctls": ipc_sysctls(environment),
    }
    if not environment.spec.agent_runs_setuid:
        service["security_opt"] = ["no-new-privileges:true"]
    service.update(cpus=resources.cpus, mem_limit=f"{resources.memory_gb}g")
    if resources.gpus:
        service["deploy"] = {
            "resources": {
                "reservations": {"devices": [{"driver": "nvidia", "count": resources.gpus, "capabilities": ["gpu"]}]}
            }
        }
    return service


def compose(environment: ResolvedEnvironment) -> dict[str, Any]:
    """The Docker sandbox's compose document. Given to Inspect as a file (`compose_file`), not as a `ComposeConfig`:
    Inspect 0.3.285's ComposeService refuses `sysctls`, and a config it cannot read back breaks the eval's log. Every
    other field is checked against that model here."""
    document = {"services": with_scoring_service(environment, compose_service(environment))}
    without_sysctls = {
        name: {key: value for key, value in service.items() if key != "sysctls"}
        for name, service in document["services"].items()
    }
    ComposeConfig.model_validate({"services": without_sysctls})
    return document


def with_scoring_service(environment: ResolvedEnvironment, service: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The sandbox's services: the agent's (`default`) and, for an environment that scores apart from the agent, a
    second one like it (same image, limits and devices, its own filesystem, no network) where scoring runs."""
    services = {"default": service}
    if environment.spec.isolated_scoring:
        services[SCORING_SERVICE] = dict(service)
    return services


def k8s_values(environment: ResolvedEnvironment) -> dict[str, Any]:
    """Helm values for inspect-k8s-sandbox's agent-env chart (validated against its schema by the tests).

    The container runs as root (exec(user="agent") goes through runuser); the agent's tools run as `agent`. Its
    temporary folders and /dev/shm are capped as `CONTAINER_LIMITS` says, and no setuid program gains privileges
    unless the agent needs one.
    GPU environments get the GPU count as request and limit, the NVIDIA toleration, and a runtime class and node
    selector that `REBENCH_K8S_RUNTIME_CLASS` / `REBENCH_K8S_NODE_SELECTOR` override for one run.
    """
    resources = environment.resources
    gpus = resources.gpus
    amounts: dict[str, str] = {"cpu": str(resources.cpus), "memory": f"{resources.memory_gb}Gi"}
    if gpus:
        amounts["nvidia.com/gpu"] = str(gpus)
    service: dict[str, Any] = {
        "image": image_tag(environment.name, environment.scale),
        "command": KEEP_ALIVE,
        "workingDir": AGENT_WORKSPACE,
        "networkIsolated": True,  # per service in the chart: no egress, no ingress
        "resources": {"requests": dict(amounts), "limits": dict(amounts)},
    }
    limits = environment.container_limits
    # Memory-backed emptyDirs hold a tmpfs of at most sizeLimit; they start 0777, which setup makes sticky (1777).
    # The pids limit is the kubelet's (`podPidsLimit`), not the pod's, and a pod spec has no rlimits, so neither the
    # pids limit nor `processes_per_user` is set here: see docs/security-model.md.
    sizes = {"/dev/shm": limits.shm_gb, **dict.fromkeys(TEMP_DIRS, limits.temp_gb)}
    names = {folder: folder.strip("/").replace("/", "-") for folder in sizes}
    service["volumes"] = [
        {"name": names[folder], "emptyDir": {"medium": "Memory", "sizeLimit": f"{gb}Gi"}}
        for folder, gb in sizes.items()
    ]
    service["volumeMounts"] = [{"name": names[folder], "mountPath": folder} for folder in sizes]
    if not environment.spec.agent_runs_setuid:
        service["securityContext"] = {"allowPrivilegeEscalation": False}
    if gpus:
        service["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    # Unset: GPU pods get the GPU operator's runtime class, CPU pods the chart's default (gVisor).
    runtime_class = os.environ.get(K8S_RUNTIME_CLASS_VARIABLE) or (DEFAULT_GPU_RUNTIME_CLASS if gpus else None)
    if runtime_class:
        service["runtimeClassName"] = runtime_class
    selector_text = os.environ.get(K8S_NODE_SELECTOR_VARIABLE)
    selector = json.loads(selector_text) if selector_text else (DEFAULT_GPU_NODE_SELECTOR if gpus else {})
    if selector:
        service["nodeSelector"] = selector
    return {"services": with_scoring_service(environment, service)}


def k8s_values_file(environment: ResolvedEnvironment) -> Path:
    """Write the values where the k8s sandbox can read them."""
    return generated_file(environment, "k8s-values", k8s_values(environment))


def compose_file(environment: ResolvedEnvironment) -> Path:
    """Write the compose document where the Docker sandbox can read it."""
    return generated_file(environment, "compose", compose(environment))


def generated_file(environment: ResolvedEnvironment, kind: str, document: dict[str, Any]) -> Path:
    """`document` as YAML under the cache root's `kind` folder; the name hashes the content (runs never collide, and
    a retried eval regenerates the same file)."""
    name, scale = environment.name, environment.scale
    text = yaml.safe_dump(document, sort_keys=False)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    from rebench.sandbox_lib.paths import cache_root  # here, not at import: the registry import stays light

    path = cache_root() / kind / f"{name}-{scale}-{digest}.yaml"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# Generated by rebench_inspect.runtime.sandbox for {name} ({scale}).\n{text}")
    return path


def sandbox_spec(environment: ResolvedEnvironment, sandbox_type: str) -> SandboxEnvironmentSpec:
    if sandbox_type == "docker":
        return SandboxEnvironmentSpec("docker", str(compose_file(environment)))
    if sandbox_type == "k8s":
        return SandboxEnvironmentSpec("k8s", str(k8s_values_file(environment)))
    if sandbox_type == "local":
        return SandboxEnvironmentSpec("local")
    raise ValueError(f"sandbox must be one of {', '.join(SANDBOX_TYPES)}, not {sandbox_type!r}")


def docker_problems(environment: ResolvedEnvironment) -> list[str]:
    """Everything a Docker run of this environment lacks on this machine, in plain words (empty: ready)."""
    import docker  # a heavy import, only needed here
    from docker.errors import DockerException, ImageNotFound

    from .gpu_preflight import gpu_problems  # driver, GPU count and memory, the host's CPUs and memory

    scale = environment.scale
    image = image_tag(environment.name, scale)
    gpus_needed = environment.resources.gpus
    machine = gpu_problems(environment.spec) if scale == "full" else []
    try:
        client = docker.from_env(timeout=5)
        info = client.info()
    except DockerException as ex:
        return [
            (
                f"no Docker engine is reachable ({ex.__class__.__name__}): start Docker (on a machine with only the "
                "client, as root: `bash sandboxes/engine.sh install && bash sandboxes/engine.sh start`), "
                "or use --sandbox local / k8s"
            ),
            *machine,
        ]
    problems: list[str] = []
    if gpus_needed and "nvidia" not in (info.get("Runtimes") or {}):
        problems.append("Docker has no NVIDIA runtime: install the NVIDIA Container Toolkit")
    problems += machine
    try:
        client.images.get(image)
    except ImageNotFound:
        problems.append(
            f"image {image} is not present: build it from a clone with "
            f"`rebench images build {environment.name} --scale {scale}` (no registry publishes it)"
        )
    except DockerException as ex:
        problems.append(f"could not inspect image {image}: {ex}")
    return problems


def local_problems(environment: EnvironmentSpec) -> list[str]:
    """What a local-sandbox run of this environment lacks on this machine (empty: ready): its `local_check`."""
    if environment.local_check is None:
        return []
    check = subprocess.run(
        [sys.executable, str(environment.folder / environment.local_check)], capture_output=True, text=True, timeout=60
    )
    if check.returncode == 0:
        return []
    return [check.stdout.strip() or check.stderr.strip() or f"{environment.local_check} exited {check.returncode}"]


def sandbox_on_the_command_line(argv: list[str], environ: dict[str, str]) -> str | None:
    """The sandbox type `inspect eval --sandbox TYPE[:CONFIG]` (or its INSPECT_EVAL_SANDBOX variable) runs the task in
    instead of the task's own. Inspect applies it after the task is built, so the task only sees it here."""
    for position, argument in enumerate(argv):
        if argument == "--sandbox" and position + 1 < len(argv):
            return argv[position + 1].partition(":")[0]
        if argument.startswith("--sandbox="):
            return argument.partition("=")[2].partition(":")[0]
    return environ.get("INSPECT_EVAL_SANDBOX", "").partition(":")[0] or None


def warn_about_docker(environment: ResolvedEnvironment) -> None:
    """Log what a Docker run lacks, unless the command line puts another sandbox in Docker's place. Never raises: the
    run may still go elsewhere (an eval's `sandbox=` argument)."""
    if sandbox_on_the_command_line(sys.argv[1:], dict(os.environ)) not in (None, "docker"):
        return
    for problem in docker_problems(environment):
        logger.warning(
            "rebench preflight for a Docker run of %s (ignore with --sandbox local or k8s): %s",
            environment.name,
            problem,
        )
