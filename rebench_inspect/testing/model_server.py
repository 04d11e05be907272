"""A fake OpenAI-compatible Chat Completions endpoint on 127.0.0.1, for tests: what a sandbox program (a judge
client, a scaffold, a reference solution) reaches through the harness's model proxy, answered offline.

`ModelServer(respond)` answers each request with `respond(prompt, n)` (the prompt: the messages' text, one per
line; n: the choices asked for); `ModelServer(smoke_responder(name))` answers as the offline smoke model
`rebench_smoke/<name>` an environment registered. Like the proxy it can require its key in `X-Rebench-Proxy-Key`,
refuse calls past a budget, and record every answer it serves in a folder.
"""

import json
import secrets
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Self

Responder = Callable[[str, int], list[str]]
"""(prompt, number of choices) -> the answers, as a smoke model's responder."""
KEY_HEADER = "X-Rebench-Proxy-Key"


class ModelServer:
    """The endpoint at `env["OPENAI_BASE_URL"]`. `keyed`: refuse requests without its own secret key, given in
    `env`; `max_calls`: refuse calls past that many, as an exhausted budget; `refuse`: a request's refusal message
    (None: answer it); `record`: write each served answer list to `responses_dir`. Counters: calls served, refused,
    unauthorised, recorded."""

    def __init__(
        self,
        respond: Responder,
        *,
        keyed: bool = False,
        max_calls: int | None = None,
        refuse: Callable[[str], str | None] | None = None,
        record: bool = False,
        exhausted_message: str = "the call budget is exhausted",
    ) -> None:
        self.respond, self.max_calls, self.refuse = respond, max_calls, refuse
        self.key = secrets.token_urlsafe(16) if keyed else None
        self.exhausted_message = exhausted_message
        self.calls = self.refused = self.unauthorised = self.recorded = 0
        self.responses_dir = Path(tempfile.mkdtemp(prefix="rebench-model-server-")) if record else None
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _answer(self, headers: dict[str, str], body: dict) -> tuple[int, dict]:
        if self.key is not None and headers.get(KEY_HEADER.lower()) != self.key:
            with self.lock:
                self.unauthorised += 1
            return 400, {"error": {"message": "this endpoint needs its key", "type": "invalid_request"}}
        with self.lock:
            refused = self.max_calls is not None and self.calls >= self.max_calls
            self.calls += 0 if refused else 1
            self.refused += 1 if refused else 0
            served = self.calls
        if refused:
            return 400, {"error": {"message": self.exhausted_message, "type": "invalid_request"}}
        prompt = "\n".join(str(message.get("content", "")) for message in body.get("messages", []))
        refusal = self.refuse(prompt) if self.refuse else None
        if refusal is not None:
            return 400, {"error": {"message": refusal, "type": "invalid_request"}}
        answers = self.respond(prompt, int(body.get("n") or 1))
        if self.responses_dir is not None:
            with self.lock:
                self.recorded += 1
                (self.responses_dir / f"{self.recorded:07d}.json").write_text(json.dumps(answers))
        choices = [
            {"index": index, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}
            for index, answer in enumerate(answers)
        ]
        usage = {"prompt_tokens": max(1, len(prompt) // 4), "completion_tokens": 10}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        return 200, {
            "id": f"fake-{served}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "smoke"),
            "choices": choices,
            "usage": usage,
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        answer = self._answer

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, payload = answer({name.lower(): value for name, value in self.headers.items()}, body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    @property
    def env(self) -> dict[str, str]:
        """The variables the harness gives a sandbox program for its model endpoint."""
        variables = {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{self.server.server_address[1]}/v1",
            "OPENAI_API_KEY": self.key or "rebench-proxy",
        }
        if self.key is not None:
            variables["REBENCH_PROXY_KEY"] = self.key
        if self.responses_dir is not None:
            variables["REBENCH_MODEL_RESPONSES_DIR"] = str(self.responses_dir)
        return variables

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        if self.responses_dir is not None:
            shutil.rmtree(self.responses_dir, ignore_errors=True)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def smoke_responder(name: str) -> Responder:
    """The answers of the offline smoke model `rebench_smoke/<name>` an environment registered (smoke.py)."""
    from inspect_ai.model import ChatMessageUser

    from rebench_inspect.runtime.smoke import smoke_output

    def respond(prompt: str, choices: int) -> list[str]:
        output = smoke_output(name, name, [ChatMessageUser(content=prompt)], choices)
        return [choice.message.text for choice in output.choices]

    return respond
