"""The generated Docker sandbox's limits, tried as `agent` in a real container: a fork bomb stops at the agent's
process limit, below the pids limit, a write larger than a capped temporary folder fails, and no setuid program can
gain privileges.

The container is the generated compose service brought up with `docker compose` (what Inspect's Docker sandbox runs),
without an eval: the limits are the engine's, whatever runs inside.
"""

import subprocess
import uuid

import pytest
import yaml

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.sandbox import TEMP_DIRS, compose_service, processes_per_user
from rebench_inspect.spec.environment import CONTAINER_LIMITS

from .conftest import DOCKER_ENVIRONMENTS

pytestmark = [pytest.mark.docker, pytest.mark.parametrize("name", DOCKER_ENVIRONMENTS)]

# Forks until refused, keeps every child alive until the loop ends, then prints "<started> <refused>".
FORK_BOMB = """
import os, sys, time
started, refused = [], 0
for _ in range(int(sys.argv[1])):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    started.append(pid)
for pid in started:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
print(len(started), refused)
"""
# Writes $2 MiB into the file $1, prints dd's first line (its error, if any) and the file's size, removes the file.
LARGE_WRITE = 'dd if=/dev/zero of="$1" bs=1M count="$2" 2>&1 | head -n 1; echo "SIZE=$(stat -c %s "$1")"; rm -f "$1"'


@pytest.fixture
def container(name, smoke_image, tmp_path):
    """`docker compose exec` into the environment's generated smoke service (removed after the test)."""
    smoke_image(ENVIRONMENTS[name])
    compose_file = tmp_path / "compose.yaml"
    compose_file.write_text(yaml.safe_dump({"services": {"default": compose_service(ENVIRONMENTS[name].at("smoke"))}}))
    compose = ["docker", "compose", "-p", f"rebench-limits-{uuid.uuid4().hex[:12]}", "-f", str(compose_file)]
    subprocess.run([*compose, "up", "-d", "--wait"], check=True, capture_output=True, timeout=300)

    def run(command: list[str], user: str = "agent") -> subprocess.CompletedProcess:
        return subprocess.run(
            [*compose, "exec", "-T", "-u", user, "default", *command],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    try:
        yield run
    finally:
        subprocess.run([*compose, "down", "-t", "0"], capture_output=True, timeout=300, check=False)


@pytest.mark.holds_the_agents_process_slots
def test_a_fork_bomb_stops_at_the_agents_process_limit(name, container):
    limit = CONTAINER_LIMITS["smoke"].pids
    bomb = container(["python3", "-c", FORK_BOMB, str(limit + 100)])
    assert bomb.returncode == 0, bomb.stdout + bomb.stderr
    started, refused = map(int, bomb.stdout.split())
    # at most its own limit (the host's other processes of the same uid count too), so root's slots stay free
    assert refused > 0 and started < processes_per_user(ENVIRONMENTS[name].at("smoke")) < limit, bomb.stdout
    # the container lives on: once the bomb is gone, root (the harness) runs commands again
    assert container(["true"], user="root").returncode == 0


@pytest.mark.parametrize("folder", [*TEMP_DIRS, "/dev/shm"])
def test_a_write_larger_than_a_temporary_folder_fails(container, folder):
    limits = CONTAINER_LIMITS["smoke"]
    cap_mib = (limits.shm_gb if folder == "/dev/shm" else limits.temp_gb) * 1024
    written = container(["sh", "-c", LARGE_WRITE, "large-write", f"{folder}/large", str(cap_mib + 64)])
    assert "No space left on device" in written.stdout, written.stdout + written.stderr
    size = int(written.stdout.rsplit("SIZE=", 1)[1])
    assert size <= cap_mib * 1024 * 1024, written.stdout


def test_no_setuid_program_gains_privileges_unless_the_agent_needs_one(name, container):
    status = container(["grep", "NoNewPrivs", "/proc/self/status"])
    assert status.stdout.split() == ["NoNewPrivs:", "0" if ENVIRONMENTS[name].agent_runs_setuid else "1"], status
