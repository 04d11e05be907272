"""The Docker tier (marker `docker`): every environment with an image definition, at smoke scale, in a real engine.

Skips with one reason where no engine answers. Images are built once, before the tests
(`rebench images build ENV --scale smoke`; .ci/run builds every one); a test whose image is missing skips and says
the command, so a shared machine with an engine never starts a build from a test run.
"""

import subprocess

import pytest

from rebench.environments import ENVIRONMENTS
from rebench_inspect.runtime.sandbox import image_tag, sandbox_folder
from rebench_inspect.spec.environment import EnvironmentSpec

# Every implemented environment whose sandboxes/<name>/Dockerfile exists: a new one is covered once it has one.
DOCKER_ENVIRONMENTS = sorted(name for name in ENVIRONMENTS if (sandbox_folder(name) / "Dockerfile").is_file())


def engine_answers() -> bool:
    try:
        return subprocess.run(["docker", "info"], capture_output=True, timeout=20, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def pytest_collection_modifyitems(config, items):
    docker_items = [item for item in items if item.get_closest_marker("docker")]
    if docker_items and not engine_answers():
        skip = pytest.mark.skip(
            reason="no Docker engine answers (start one: see docs/running.md, 'Docker on a laptop')"
        )
        for item in docker_items:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def smoke_image():
    """Skip unless the environment's smoke image exists; returns its tag."""
    from rebench_inspect.tools.images import image_exists

    def require(environment: EnvironmentSpec) -> str:
        tag = image_tag(environment.name, "smoke")
        if not image_exists(tag):
            pytest.skip(f"no image {tag}: rebench images build {environment.name} --scale smoke")
        return tag

    return require
