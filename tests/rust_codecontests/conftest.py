"""Helpers to run the rust_codecontests scoring program the way the host does (see docs/CONTRACT.md).

Scoring runs use the host's own staging (rebench_inspect/testing/programs.py); `prepare_smoke` runs prepare.py the same
way; `fake_openai` serves the offline smoke scaffold model over an OpenAI-compatible HTTP endpoint
(rebench_inspect/testing/model_server.py), so scoring tests need neither Inspect nor the network. Like the harness's
proxy it refuses requests without its key (`X-Rebench-Proxy-Key`) and records every completion it serves in
`$REBENCH_MODEL_RESPONSES_DIR`; a prompt starting with `ECHO:` gets the rest back verbatim (a model that writes
whatever program a test needs it to write).
"""

import os
import subprocess
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from rebench.rust_codecontests.smoke_model import smoke_answers
from rebench.rust_codecontests.task import ENVIRONMENT
from rebench_inspect.runtime.staging import copy_workspace
from rebench_inspect.testing import programs
from rebench_inspect.testing.model_server import ModelServer

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "rust_codecontests"
START_SOLUTION = TASK / "agent" / "workspace" / "solution.py"
REFERENCE_SOLUTION = TASK / "reference" / "solution.py"
HACKS = Path(__file__).resolve().parent / "hacks"


def prepare_smoke(workspace: Path, protected: Path) -> None:
    completed = programs.run_preparation(ENVIRONMENT, workspace, protected, setup=False)
    assert completed.returncode == 0, completed.stderr[-3000:]


@pytest.fixture
def environment():
    return ENVIRONMENT


def make_env(root: Path, solution: Path | str | None) -> tuple[Path, Path]:
    """A workspace (starting files + the given solution.py) and a protected dir with the smoke data."""
    workspace, protected = root / "workspace", root / "protected"
    copy_workspace(ENVIRONMENT.at("full"), workspace)
    protected.mkdir()
    prepare_smoke(workspace, protected)
    if solution is not None:
        text = solution.read_text() if isinstance(solution, Path) else solution
        (workspace / "solution.py").write_text(text)
    return workspace, protected


def run_scoring(workspace: Path, protected: Path, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return programs.run_scoring_program(ENVIRONMENT, workspace, protected, env={**os.environ, **env}, **kwargs)


def score_workspace(workspace: Path, protected: Path, env: dict[str, str], **kwargs) -> dict:
    return programs.scoring_result(ENVIRONMENT, workspace, protected, env={**os.environ, **env}, **kwargs)


ECHO = "ECHO:"


def scaffold_or_echo(prompt: str, choices: int) -> list[str]:
    return [prompt[len(ECHO) :]] * choices if prompt.startswith(ECHO) else smoke_answers(prompt, choices)


# Chat Completions over HTTP answered by the smoke scaffold model, behind a key, every answer recorded; `max_calls`
# mimics an exhausted budget.
FakeOpenAI = partial(
    ModelServer, scaffold_or_echo, keyed=True, record=True, exhausted_message="scaffold API budget exhausted"
)


@pytest.fixture
def fake_openai() -> Iterator[ModelServer]:
    with FakeOpenAI() as server:
        yield server


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs the Docker image's users (root, `agent`, `rebench-runner`)")
