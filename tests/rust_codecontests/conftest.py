"""Helpers to run the rust_codecontests scoring program the way the host does (see docs/CONTRACT.md).

Scoring runs use the host's own staging (tests/scoring_program.py); `prepare_smoke` runs prepare.py the same way; `fake_openai` serves the
offline smoke scaffold model over an OpenAI-compatible HTTP endpoint, so scoring tests need neither Inspect nor
the network. Like the harness's proxy it refuses requests without its key (`X-Rebench-Proxy-Key`) and records every
completion it serves in `$REBENCH_MODEL_RESPONSES_DIR`; a prompt starting with `ECHO:` gets the rest back verbatim
(a model that writes whatever program a test needs it to write).
"""

import json
import os
import secrets
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rebench.rust_codecontests.smoke_model import smoke_answers
from rebench.rust_codecontests.task import ENVIRONMENT
from rebench_inspect.runtime.staging import copy_workspace
from tests import scoring_program as shared

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "rust_codecontests"
START_SOLUTION = TASK / "agent" / "workspace" / "solution.py"
REFERENCE_SOLUTION = TASK / "reference" / "solution.py"
HACKS = Path(__file__).resolve().parent / "hacks"


def prepare_smoke(workspace: Path, protected: Path) -> None:
    completed = shared.run_preparation(ENVIRONMENT, workspace, protected, setup=False)
    assert completed.returncode == 0, completed.stderr[-3000:]


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
    return shared.run_scoring_program(ENVIRONMENT, workspace, protected, env={**os.environ, **env}, **kwargs)


def score_workspace(workspace: Path, protected: Path, env: dict[str, str], **kwargs) -> dict:
    return shared.scoring_result(ENVIRONMENT, workspace, protected, env={**os.environ, **env}, **kwargs)


ECHO = "ECHO:"


class FakeOpenAI:
    """Chat Completions over HTTP answered by the smoke scaffold model; `max_calls` mimics an exhausted budget."""

    def __init__(self, max_calls: int | None = None) -> None:
        self.max_calls = max_calls
        self.calls = 0
        self.refused = 0
        self.unauthorised = 0
        self.recorded = 0
        self.key = secrets.token_urlsafe(16)
        self.responses_dir = Path(tempfile.mkdtemp(prefix="fake-openai-responses-"))
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                if self.headers.get("X-Rebench-Proxy-Key") != fake.key:
                    with fake.lock:
                        fake.unauthorised += 1
                    self._send(400, {"error": {"message": "this endpoint needs its key", "type": "invalid_request"}})
                    return
                with fake.lock:
                    refused = fake.max_calls is not None and fake.calls >= fake.max_calls
                    fake.calls += 0 if refused else 1
                    fake.refused += 1 if refused else 0
                if refused:
                    self._send(400, {"error": {"message": "scaffold API budget exhausted", "type": "invalid_request"}})
                    return
                prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
                n = body.get("n") or 1
                answers = [prompt[len(ECHO):]] * n if prompt.startswith(ECHO) else smoke_answers(prompt, n)
                with fake.lock:
                    fake.recorded += 1
                    (fake.responses_dir / f"{fake.recorded:07d}.json").write_text(json.dumps(answers))
                self._send(200, {
                    "id": f"fake-{fake.calls}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "smoke"),
                    "choices": [{"index": i, "message": {"role": "assistant", "content": a}, "finish_reason": "stop"}
                                for i, a in enumerate(answers)],
                    "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": 10, "total_tokens": 10},
                })

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def env(self) -> dict[str, str]:
        return {"OPENAI_BASE_URL": f"http://127.0.0.1:{self.server.server_address[1]}/v1",
                "OPENAI_API_KEY": self.key, "REBENCH_PROXY_KEY": self.key,
                "REBENCH_MODEL_RESPONSES_DIR": str(self.responses_dir)}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.responses_dir, ignore_errors=True)


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    server = FakeOpenAI()
    yield server
    server.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "docker: needs the Docker image's users (root, `agent`, `rebench-runner`)")
