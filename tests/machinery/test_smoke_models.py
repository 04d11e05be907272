"""The offline `rebench_smoke/<name>` provider: one Inspect model API serving the models environments register."""

import asyncio

import pytest
from inspect_ai.model import ChatMessageSystem, ChatMessageUser, GenerateConfig, get_model

from rebench_inspect.runtime import smoke


def generate(model: str, prompt: str, choices: int = 1):
    messages = [ChatMessageSystem(content="be brief"), ChatMessageUser(content=prompt)]
    return asyncio.run(get_model(model).generate(messages, config=GenerateConfig(num_choices=choices)))


@pytest.fixture
def registry(monkeypatch):
    """A registry holding only what the test registers (the environments' own registrations, made on import, are kept
    apart: Inspect may load its entry points while the test runs)."""
    smoke._load_environments()
    monkeypatch.setattr(smoke, "_RESPONDERS", {})
    monkeypatch.setattr(smoke, "_fallback", None)
    monkeypatch.setattr(smoke, "_load_environments", lambda: None)


def test_a_registered_model_answers_by_its_name_with_usage(registry):
    assert smoke.register_smoke_model("echo", lambda prompt, n: [prompt.upper()] * n) == "rebench_smoke/echo"
    output = generate("rebench_smoke/echo", "hello", choices=2)
    assert [choice.message.text for choice in output.choices] == ["BE BRIEF\nHELLO"] * 2
    assert output.model == "rebench_smoke/echo"
    assert output.usage.input_tokens == len("be brief\nhello") // 4
    assert output.usage.output_tokens == 2 * (len("BE BRIEF\nHELLO") // 4)


def test_the_fallback_answers_unregistered_names_and_nothing_answers_without_one(registry):
    smoke.register_smoke_model("echo", lambda prompt, n: ["echo"])
    with pytest.raises(ValueError, match="no offline smoke model is named rebench_smoke/other"):
        generate("rebench_smoke/other", "hi")
    smoke.register_smoke_model("fixed", lambda prompt, n: ["fixed"], fallback=True)
    assert generate("rebench_smoke/other", "hi").choices[0].message.text == "fixed"
    assert generate("rebench_smoke/echo", "hi").choices[0].message.text == "echo"


def test_a_name_or_the_fallback_is_taken_once(registry):
    smoke.register_smoke_model("a", lambda prompt, n: ["a"], fallback=True)
    with pytest.raises(ValueError, match="already registered"):
        smoke.register_smoke_model("a", lambda prompt, n: ["b"])
    with pytest.raises(ValueError, match="already the fallback"):
        smoke.register_smoke_model("c", lambda prompt, n: ["c"], fallback=True)


def test_the_environments_register_the_names_users_type():
    """README's `rebench_smoke/scaffold` and `rebench_smoke/judge` (any other name answers as the scaffold), found
    even when only the provider has been imported: a name it does not know loads the environments first."""
    scaffold = generate("rebench_smoke/scaffold", "Sum of Pairs", choices=3)
    assert len(scaffold.choices) == 3 and "fn main" in scaffold.choices[0].message.text
    judge = generate("rebench_smoke/judge", "unreadable", choices=3)
    assert [choice.message.text for choice in judge.choices] == ["I cannot rank these answers."]
    other = generate("rebench_smoke/anything", "Sum of Pairs", choices=3)
    assert [c.message.text for c in other.choices] == [c.message.text for c in scaffold.choices]
