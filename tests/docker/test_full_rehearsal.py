"""The full images a rehearsal built here (`rebench images rehearse ENV`) pass the image check without a GPU: pinned
versions, CUDA libraries that load, accounts and folders as the Dockerfile makes them, and a scoring program that
starts (and refuses without its GPUs). Skips per environment whose rehearsal image is not built: a rehearsal takes
tens of minutes and GBs, so no test starts one."""

import json
import subprocess

import pytest

from rebench.environments import ENVIRONMENTS
from rebench_inspect.tools.images import FLASH_ATTN_LABEL, image_exists, rehearsal_tag
from rebench_inspect.tools.rehearsal import check_image

from .conftest import DOCKER_ENVIRONMENTS

pytestmark = pytest.mark.docker


@pytest.mark.parametrize("name", DOCKER_ENVIRONMENTS)
def test_a_rehearsed_full_image_passes_the_image_check(name):
    tag = rehearsal_tag(name)
    if not image_exists(tag):
        pytest.skip(f"no image {tag}: rebench images rehearse {name}")
    result = check_image(tag, ENVIRONMENTS[name])
    if image_label(tag, FLASH_ATTN_LABEL) == "none":  # built without flash-attn's wheel: that pin alone must fail
        assert result.problems == ["/opt/llm-foundry: flash-attn is None, pinned 2.6.3"]
    else:
        assert result.problems == []


def image_label(tag: str, label: str) -> str:
    labels = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", tag],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return (json.loads(labels) or {}).get(label, "")
