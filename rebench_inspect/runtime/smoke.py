"""Offline stand-in models for smoke runs: one Inspect provider, `rebench_smoke/<name>`, whose models an environment
registers.

An environment whose smoke scale needs a model without network (a scaffold model, a judge) registers a responder
under a name; `--model rebench_smoke/<name>` or `--model-role <role>=rebench_smoke/<name>` then reaches it:

    SMOKE_ECHO_MODEL = register_smoke_model("echo", lambda prompt, n: [prompt] * n)   # "rebench_smoke/echo"

A responder maps the prompt (the system and user messages' text, one per line) and the number of choices asked for
to its answers; it must be deterministic. One registered model may be the fallback that answers any other name.
Every output carries `usage` estimated from the text lengths, so nothing ever needs tiktoken. Environments register
when their task module is imported; a name not registered yet loads Inspect's entry points (every environment)
before it is refused.
"""

import functools
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from inspect_ai.model import (
    ChatCompletionChoice,
    ChatMessage,
    ChatMessageAssistant,
    GenerateConfig,
    ModelAPI,
    ModelOutput,
    ModelUsage,
    modelapi,
)
from inspect_ai.tool import ToolChoice, ToolInfo

PROVIDER = "rebench_smoke"

SmokeResponder = Callable[[str, int], list[str]]
"""(prompt, number of choices asked for) -> the answers."""

_RESPONDERS: dict[str, SmokeResponder] = {}
_fallback: str | None = None  # the registered name that answers unregistered names


def register_smoke_model(name: str, respond: SmokeResponder, fallback: bool = False) -> str:
    """Serve `respond` as `rebench_smoke/<name>` (and as every unregistered name if `fallback`); returns that model
    name."""
    global _fallback
    if _RESPONDERS.get(name, respond) is not respond:
        raise ValueError(f"another smoke model is already registered as {PROVIDER}/{name}")
    if fallback and _fallback not in (None, name):
        raise ValueError(f"{PROVIDER}/{_fallback} is already the fallback smoke model")
    _RESPONDERS[name] = respond
    if fallback:
        _fallback = name
    return f"{PROVIDER}/{name}"


@functools.cache
def _load_environments() -> None:
    """Import every Inspect plugin (rebench's environments among them), which registers their smoke models."""
    for entry_point in entry_points(group="inspect_ai"):
        entry_point.load()


def _responder(name: str) -> SmokeResponder:
    if name not in _RESPONDERS:
        _load_environments()
    if name in _RESPONDERS:
        return _RESPONDERS[name]
    if _fallback is not None:
        return _RESPONDERS[_fallback]
    raise ValueError(
        f"no offline smoke model is named {PROVIDER}/{name} (registered: {', '.join(sorted(_RESPONDERS))})"
    )


def prompt_text(messages: list[ChatMessage]) -> str:
    return "\n".join(m.text for m in messages if m.role in ("system", "user"))


def smoke_output(model: str, name: str, messages: list[ChatMessage], choices: int = 1) -> ModelOutput:
    """The output of `rebench_smoke/<name>` for `messages`, labelled as `model`."""
    prompt = prompt_text(messages)
    answers = _responder(name)(prompt, max(1, int(choices or 1)))
    input_tokens = max(1, len(prompt) // 4)
    output_tokens = sum(max(1, len(answer) // 4) for answer in answers)
    return ModelOutput(
        model=model,
        choices=[
            ChatCompletionChoice(message=ChatMessageAssistant(content=answer, model=model), stop_reason="stop")
            for answer in answers
        ],
        usage=ModelUsage(
            input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=input_tokens + output_tokens
        ),
    )


def smoke_custom_outputs(
    name: str,
) -> Callable[[list[ChatMessage], list[ToolInfo], ToolChoice, GenerateConfig], ModelOutput]:
    """`rebench_smoke/<name>` as a `mockllm/model` `custom_outputs` callable (one choice unless `num_choices`)."""

    def outputs(
        input: list[ChatMessage], tools: list[ToolInfo], tool_choice: ToolChoice, config: GenerateConfig
    ) -> ModelOutput:
        return smoke_output("mockllm/model", name, input, config.num_choices or 1)

    return outputs


@modelapi(name=PROVIDER)
class SmokeModelAPI(ModelAPI):
    """`rebench_smoke/<name>`: the offline smoke model an environment registered as `name` (module docstring)."""

    def __init__(
        self,
        model_name: str,
        base_url: str | None = None,
        api_key: str | None = None,
        config: GenerateConfig = GenerateConfig(),
        **model_args: Any,
    ) -> None:
        super().__init__(model_name=model_name, base_url=base_url, api_key=api_key, config=config)

    async def generate(
        self,
        input: list[ChatMessage],
        tools: list[ToolInfo],
        tool_choice: ToolChoice,
        config: GenerateConfig,
    ) -> ModelOutput:
        return smoke_output(f"{PROVIDER}/{self.model_name}", self.model_name, input, config.num_choices or 1)

    def max_connections(self) -> int:
        return 32
