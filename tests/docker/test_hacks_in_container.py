"""The host tests that need a second user run inside the environment's smoke image, where the image's users exist.

On a host without a usable second user these tests skip (no `agent`/`rebench-runner`, or an interpreter other users
cannot run). Here each runs unchanged, as root in a container of the smoke image (no network), with the image's
interpreter and torch: the scoring program is staged by the host's own staging code and demotes the agent's code
to the image's unprivileged users, the way scoring does in the sandbox. The test packages (pytest, Inspect) come
from this checkout's environment, mounted read-only and put after the image's own packages on `sys.path`, so the
scoring programs these tests start see only the image's packages.

Each listed test must pass there: a skip fails this test, so the list cannot silently stop covering a defence.
"""

import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS

from .conftest import DOCKER_ENVIRONMENTS

ROOT = Path(__file__).resolve().parents[2]

# Environment whose image runs them → host tests that skip without a second user (grep: throwaway_user, 'nobody',
# `_users_ready`, `_image_ready`). sandbox_lib's checkpoint loader runs where fix_embedding's scorer uses it.
SECOND_USER_TESTS = {
    "optimize_kernel": [
        "tests/optimize_kernel/test_scoring.py::test_run_as_unprivileged_user",
        "tests/optimize_kernel/test_isolation_users.py::test_no_agent_process_opens_the_workers_input_and_all_run_on",
    ],
    "fix_embedding": [
        "tests/fix_embedding/test_scoring.py::test_run_as_user_cannot_read_protected_files",
        "tests/machinery/test_checkpoint_loader.py::test_the_agent_users_permissions_apply",
    ],
    "restricted_mlm": ["tests/restricted_mlm/test_scoring.py::test_the_agents_user_cannot_read_the_held_out_tokens"],
    "scaling_law": [
        "tests/scaling_law/test_trainer_users.py::test_the_final_stop_ends_a_trainer_the_agent_started_through_sudo"
    ],
    "rust_codecontests": [
        "tests/rust_codecontests/test_isolation_users.py::test_quarantine_removes_every_channel",
        "tests/rust_codecontests/test_scoring.py::test_run_as_user_cannot_read_held_out_data",
    ],
}
IN_CONTAINER_TIMEOUT_S = 900

pytestmark = [
    pytest.mark.docker,
    pytest.mark.parametrize("name", [name for name in DOCKER_ENVIRONMENTS if name in SECOND_USER_TESTS]),
]


def run_in_image(image: str, node_ids: list[str]) -> subprocess.CompletedProcess:
    """pytest on `node_ids` as root in a fresh container of `image` (checkout and test packages read-only)."""
    package_dirs = [path for path in site.getsitepackages() if not Path(path).is_relative_to(ROOT)]
    mounts = [f"--volume={path}:{path}:ro" for path in [str(ROOT), *package_dirs]]
    # addsitedir appends (and reads the editable install's .pth files): the image's packages come first.
    program = (
        "import site, sys\n"
        f"for path in {site.getsitepackages()!r}: site.addsitedir(path)\n"
        "import pytest\n"
        f"sys.exit(pytest.main(['-q', '-rA', '-p', 'no:cacheprovider', *{node_ids!r}]))\n"
    )
    command = ["docker", "run", "--rm", "--network=none", "--env=PYTHONDONTWRITEBYTECODE=1", *mounts]
    command += [f"--workdir={ROOT}", image, "python3", "-c", program]
    return subprocess.run(command, capture_output=True, text=True, timeout=IN_CONTAINER_TIMEOUT_S, check=False)


def test_second_user_tests_pass_in_the_image(name, smoke_image):
    image = smoke_image(ENVIRONMENTS[name])
    version = subprocess.run(
        ["docker", "run", "--rm", "--network=none", image, "python3", "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout.strip()
    if version != str(sys.version_info[:2]):
        pytest.skip(f"the image's Python {version} cannot load this environment's test packages {sys.version_info[:2]}")
    node_ids = SECOND_USER_TESTS[name]
    completed = run_in_image(image, node_ids)
    output = completed.stdout + completed.stderr
    passed = set(re.findall(r"^PASSED (\S+)", output, re.MULTILINE))
    assert completed.returncode == 0 and passed == set(node_ids), output[-6000:]
