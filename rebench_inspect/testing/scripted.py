"""A scripted agent: a mockllm model that makes given tool calls, then submits (tests and benchmarks/overhead.py)."""

from inspect_ai.model import Model, ModelOutput, ModelUsage, get_model


def _usage() -> ModelUsage:
    # mockllm counts tokens with tiktoken (a download) unless usage is given.
    return ModelUsage(input_tokens=10, output_tokens=10, total_tokens=20)


def tool_call(name: str, **arguments: object) -> ModelOutput:
    output = ModelOutput.for_tool_call("mockllm/model", name, arguments)
    output.usage = _usage()
    return output


def scripted_agent(calls: list[ModelOutput]) -> Model:
    """A mockllm model that makes the given tool calls, then submits."""
    return get_model("mockllm/model", custom_outputs=[*calls, tool_call("submit", answer="done")])
