"""The agent's shells see the image's Python environment: `python`, `python3` and `pip` are the image's venv.

The agent's bash and python tools run `bash --login -c` (as Inspect's own tools do), and a login shell reads
/etc/profile, which on Debian and Ubuntu resets PATH to the distribution's default; without the base image's
/etc/profile.d script the agent's `python3` is the system one, without torch. A scripted agent runs, through the
default agent's tools as `agent`, the commands an agent following the instructions would run.
"""

import pytest
from inspect_ai import eval

from rebench.environments import ENVIRONMENTS, TASKS
from tests.conftest import scripted_agent, tool_call

from .conftest import DOCKER_ENVIRONMENTS, fixed_smoke_anchors

pytestmark = [pytest.mark.docker, pytest.mark.parametrize("name", DOCKER_ENVIRONMENTS)]

WHICH_PYTHON = 'for tool in python python3 pip; do command -v "$tool"; done; echo "VENV=$VIRTUAL_ENV"'
KERNEL_EXAMPLE = (
    "import torch, triton\n"
    "from solution import prefix_sum\n"
    "print(prefix_sum(torch.tensor([1, 2, -3, 4, 5], dtype=torch.int32)).tolist())\n"
)
# Per environment: commands its instructions give the agent (or their worked example), and a text the output shows
# when the command ran with the image's packages.
INSTRUCTION_COMMANDS: dict[str, list[tuple[str, dict[str, str], str]]] = {
    "optimize_kernel": [
        # the instructions' example: x = [1, 2, -3, 4, 5] gives y = [0, 2, 2, 2, 7]; Triton "is installed"
        ("bash", {"command": f"python3 -c '{KERNEL_EXAMPLE}'"}, "[0, 2, 2, 2, 7]"),
        ("python", {"code": KERNEL_EXAMPLE}, "[0, 2, 2, 2, 7]"),
    ],
    "rust_codecontests": [("bash", {"command": "python validate.py --help"}, "--public-only")],
}


def test_python_and_pip_in_the_agents_shells_are_the_images_venv(name, smoke_image):
    smoke_image(ENVIRONMENTS[name])
    calls = [
        ("bash", {"command": WHICH_PYTHON}, "VENV="),
        ("bash", {"command": "pip --version"}, " from "),
        ("python", {"code": "import sys, torch; print(sys.prefix)"}, "/"),
        *INSTRUCTION_COMMANDS.get(name, []),
    ]
    task = TASKS[name](
        scale="smoke", sandbox="docker", time_budget_hours=0.5, anchors=fixed_smoke_anchors(ENVIRONMENTS[name])
    )
    agent = scripted_agent([tool_call(tool, **arguments) for tool, arguments, _ in calls])
    [log] = eval(task, model=agent, display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    outputs = [message.text for message in sample.messages if message.role == "tool"][: len(calls)]
    assert len(outputs) == len(calls), [message.text for message in sample.messages]
    for (_, arguments, expected), output in zip(calls, outputs):
        assert expected in output, (arguments, output)

    which, pip_version, interpreter_prefix = outputs[:3]
    venv = which.split("VENV=")[-1].strip()
    assert venv.startswith("/"), which
    assert which.split()[:3] == [f"{venv}/bin/python", f"{venv}/bin/python3", f"{venv}/bin/pip"], which
    assert f"from {venv}/" in pip_version, pip_version
    assert interpreter_prefix.strip() == venv, interpreter_prefix
