"""Helpers for finetune_target tests: the environment the shared fixtures prepare, score and run
(rebench_inspect/testing/fixtures.py), the scoring program run as the host runs it with the judge's variables, and
`FakeJudge`, an OpenAI-compatible HTTP endpoint answered by the offline smoke judge (so scoring tests need neither
Inspect nor the network)."""

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from rebench.finetune_target.smoke_judge import judge_replies
from rebench.finetune_target.task import ENVIRONMENT
from rebench_inspect.testing import programs
from rebench_inspect.testing.model_server import ModelServer

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "finetune_target"


class FakeJudge(ModelServer):
    """Chat Completions answered by the smoke judge (or `reply`); `max_calls` mimics an exhausted budget;
    `echo_refusal` refuses every call with an error that quotes the prompt (as a provider's error may quote a
    request)."""

    def __init__(self, max_calls: int | None = None, reply: str | None = None, echo_refusal: bool = False) -> None:
        super().__init__(
            judge_replies if reply is None else lambda prompt, choices: [reply],
            max_calls=max_calls,
            refuse=(lambda prompt: f"cannot judge this request: {prompt}") if echo_refusal else None,
            exhausted_message="The judge call budget is exhausted",
        )


@pytest.fixture
def fake_judge() -> Iterator[FakeJudge]:
    with FakeJudge() as server:
        yield server


@pytest.fixture
def environment():
    return ENVIRONMENT


def run_prepare(workspace: Path, protected: Path, scale: str = "smoke") -> subprocess.CompletedProcess:
    return programs.run_preparation(ENVIRONMENT, workspace, protected, scale=scale)


def _scoring_env(env: dict[str, str]) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "REBENCH_FT_"))}
    return {**clean, **env}


def run_scoring(workspace: Path, protected: Path, env: dict[str, str], **kwargs) -> subprocess.CompletedProcess:
    return programs.run_scoring_program(ENVIRONMENT, workspace, protected, env=_scoring_env(env), **kwargs)


def score(workspace: Path, protected: Path, env: dict[str, str], **kwargs) -> dict:
    return programs.scoring_result(ENVIRONMENT, workspace, protected, env=_scoring_env(env), **kwargs)
