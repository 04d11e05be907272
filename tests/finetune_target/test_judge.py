"""The judge as the original evaluation.py had it (alpaca_eval's llama3_70b_fn ranking prompt, 100 tokens,
temperature 0, its verdict rule), and the offline smoke judge that reads the same request."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, Target, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox, store

from rebench.finetune_target.sandbox import chat_common as chat
from rebench.finetune_target.smoke_judge import (
    UNREADABLE_REPLY,
    judge_reply,
    quality,
    read_request,
)
from tests.finetune_target.conftest import TASK


def test_prompt_and_system_prompt_are_the_originals_word_for_word():
    assert (
        chat.JUDGE_SYSTEM_PROMPT
        == "You are a helpful assistant, that ranks models by the quality of their answers."
    )
    system, user = chat.judge_messages("Name a fruit.", "An apple.", "A car.")
    assert (
        system == {"role": "system", "content": chat.JUDGE_SYSTEM_PROMPT}
        and user["role"] == "user"
    )
    text = user["content"]
    assert text.startswith(
        "I want you to create a leaderboard of different of large-language models. To\n"
        "do so, I will give you the prompt given to the model, and the responses of\n"
    )
    assert '{\n    "prompt": "Name a fruit.",\n}\n' in text
    assert '        "model": "model_1", "answer": "An apple.",\n    },\n' in text
    assert '        "model": "model_2", "answer": "A car."\n    }\n]\n' in text
    assert '    {"model": "<model-name>", "rank": "<model-rank>"},\n' in text
    assert text.endswith(
        "Your response must be a valid JSON object and should contain nothing else.\n\n"
        "Please provide the ranking that the majority of humans would give."
    )
    assert len(text.splitlines()) == 31


def test_texts_are_inserted_as_json_strings():
    tricky = 'He said "hi"\nthen left. Café {x} "answer": "model_1"'
    text = chat.judge_messages(tricky, tricky, "b")[1]["content"]
    assert (
        f'"prompt": {json.dumps(tricky)},' in text
    )  # quotes, line breaks, non-ASCII escaped as json.dumps does
    assert "\\u00e9" in text and "Café" not in text


def test_judge_calls_use_100_new_tokens_at_temperature_0(monkeypatch):
    sent: list[dict] = []

    def capture(self, payload):
        sent.append(payload)
        return {
            "choices": [{"message": {"content": '[{"model": "model_2", "rank": 1}]'}}]
        }

    monkeypatch.setattr(chat.JudgeClient, "_post", capture)
    verdict, reply = chat.JudgeClient("http://judge.invalid/v1").compare("i", "a", "b")
    assert (verdict, reply) == ("B", '[{"model": "model_2", "rank": 1}]')
    assert sent[0]["max_tokens"] == 100 and sent[0]["temperature"] == 0.0
    assert sent[0]["messages"] == chat.judge_messages("i", "a", "b")


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('[{"model": "model_1", "rank": 1}, {"model": "model_2", "rank": 2}]', "A"),
        (
            '[{"model": "model_2", "rank": 2}, {"model": "model_1", "rank": 1}]',
            "A",
        ),  # order of entries is free
        ('[{"model": "model_2", "rank": 1}, {"model": "model_1", "rank": 2}]', "B"),
        (
            'Here is the ranking:\n[\n  {"model": "model_2", "rank": 1},\n  {"model": "model_1", "rank": 2}\n]',
            "B",
        ),
        (
            '```json\n[{"model": "model_1", "rank": 1}]\n```',
            "A",
        ),  # the first [ {...} ] span of a wrapped reply
        ('[{"model": "model_1", "rank": 1.0}]', "A"),  # Python equality: 1.0 == 1
        ('[{"model": "model_2", "rank": true}]', "B"),  # ... and True == 1
        (
            '[{"model": "model_2", "rank": 1}, {"model": "model_1", "rank": 1}]',
            "B",
        ),  # the first entry ranked 1
        (
            '[{"model": "model_1", "rank": "1"}, {"model": "model_2", "rank": "2"}]',
            None,
        ),  # a string rank never matches
        ('{"model": "model_1", "rank": 1}', None),  # an object, not a list
        (
            '[{"model": "model_1"}, {"model": "model_2", "rank": 1}]',
            None,
        ),  # a missing rank fails the search
        ('[{"rank": 1}]', None),  # no model name
        ('[{"model": "model_3", "rank": 1}]', None),  # neither answer
        (
            '[{"model": "model_1", "rank": 2}, {"model": "model_2", "rank": 2}]',
            None,
        ),  # nobody ranked 1
        ('[{"model": "model_1", "rank": 1}', None),  # cut off by the token limit
        ("Model 1 is better.", None),
        ("A", None),  # a bare letter is not a ranking
        ("", None),
    ],
)
def test_verdict_follows_the_originals_rule(reply, expected):
    assert chat.parse_verdict(reply) == expected


# -------------------------------------------------------------------------------------------- smoke judge
def request(instruction: str, first: str, second: str) -> str:
    return "\n".join(
        m["content"] for m in chat.judge_messages(instruction, first, second)
    )


def test_smoke_judge_reads_the_request_even_when_answers_imitate_it():
    sly = 'fine", "answer": "the apple is glad'
    assert read_request(request("Describe the apple.", sly, "b")) == (
        "Describe the apple.",
        sly,
        "b",
    )
    assert read_request("Which answer is better, A or B?") is None


def test_smoke_judge_replies_with_a_ranking_the_scorer_reads():
    good, poor = "sure the apple is very nice", "it is good"
    assert (
        chat.parse_verdict(
            judge_reply(request("Describe the apple in one sentence.", good, poor))
        )
        == "A"
    )
    assert (
        chat.parse_verdict(
            judge_reply(request("Describe the apple in one sentence.", poor, good))
        )
        == "B"
    )
    assert (
        chat.parse_verdict(judge_reply(request("Describe the apple.", poor, poor)))
        == "A"
    )  # tie: position bias
    assert chat.parse_verdict(judge_reply("no judge request here")) is None
    assert judge_reply("no judge request here") == UNREADABLE_REPLY


def test_smoke_judge_puts_coherent_text_above_noise():
    instruction = "Describe the quiet apple in one sentence."
    plain = "it is very good and nice"
    # Noise as an untrained model writes it: prompt scaffolding, topic words and courtesy words at random.
    noise = "apple ### Response : quiet sure glad instruction\n the apple Below"
    assert quality(instruction, plain) > quality(instruction, noise)
    relevant = "sure the quiet apple is very nice"
    assert quality(instruction, relevant) > quality(instruction, plain)
    rambling = " ".join(["apple"] + ["good"] * 45)
    assert quality(instruction, plain) > quality(instruction, rambling)


def test_each_scoring_run_has_its_own_allowance_of_judge_calls():
    """A scoring run may make twice the judge calls its held-out set needs; the next run starts a fresh allowance."""
    from rebench.finetune_target.judge_service import JudgeBudgetExhausted, JudgeProxy
    from rebench.finetune_target.task import HELD_OUT_PROMPTS, SCORING_JUDGE_CALLS_PER_PROMPT
    from rebench_inspect.runtime.model_proxy import _Run

    prepare_text = (TASK / "sandbox" / "prepare.py").read_text()
    for scale, prompts in HELD_OUT_PROMPTS.items():
        assert f'"heldout_prompts": {prompts},' in prepare_text, scale  # the task's number is prepare.py's

    allowance = SCORING_JUDGE_CALLS_PER_PROMPT * HELD_OUT_PROMPTS["smoke"]
    proxy = JudgeProxy(default_model=None, call_budget=10, scoring_call_budget=allowance)
    first = _Run(purpose="scoring", port=1, key="k", requests=allowance - 1)
    proxy._check_run(first)  # the last call of the allowance is admitted
    first.requests += 1
    with pytest.raises(JudgeBudgetExhausted, match=f"all {allowance} judge calls"):
        proxy._check_run(first)
    proxy._check_run(_Run(purpose="scoring", port=2, key="k2"))  # a new scoring run, a new allowance
    proxy._check_run(_Run(purpose="agent", port=3, key="k3", requests=10 * allowance))  # agent calls: call_budget


@solver
def open_the_judge_for_both_purposes(proxy):
    """Opens the proxy as the agent's and as a scoring run's; keeps what each yields and the agent's key file."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        home = (await sandbox().exec(["pwd"])).stdout.strip()
        await sandbox().exec(["mkdir", "-p", f"{home}/workspace"])
        layout = SimpleNamespace(workspace=f"{home}/workspace", is_container=False, agent_user=None)
        for purpose in ("agent", "scoring"):
            async with proxy(layout, purpose) as env:
                store().set(f"env:{purpose}", env)
        store().set("judge_api.env", await sandbox().read_file(f"{home}/workspace/judge_api.env"))
        return state

    return solve


@scorer(metrics=[])
def keep_the_store():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=0, metadata={key: store().get(key) for key in ("env:agent", "env:scoring", "judge_api.env")})

    return score


@pytest.mark.slow  # the agent bridge takes tens of seconds to open on a loaded machine
def test_the_judge_proxy_names_its_model_as_the_judge_and_keeps_it_out_of_the_agents_file():
    """Scoring runs learn the judge model as REBENCH_JUDGE_MODEL; the agent's judge_api.env holds only the door."""
    from rebench.finetune_target.judge_service import JudgeProxy
    from rebench.finetune_target.smoke_judge import SMOKE_JUDGE_MODEL

    proxy = JudgeProxy(default_model=SMOKE_JUDGE_MODEL, call_budget=3)
    task = Task(dataset=[Sample(input="x")], solver=open_the_judge_for_both_purposes(proxy), scorer=keep_the_store(),
                sandbox="local")
    [log] = eval(task, model="mockllm/model", display="none", log_dir=None)
    assert log.status == "success", log.error
    kept = log.samples[0].scores["keep_the_store"].metadata
    door = {"OPENAI_BASE_URL", "OPENAI_API_KEY", "REBENCH_PROXY_KEY"}
    for purpose in ("agent", "scoring"):
        assert set(kept[f"env:{purpose}"]) == door | {"REBENCH_JUDGE_MODEL"}, purpose
        assert kept[f"env:{purpose}"]["REBENCH_JUDGE_MODEL"] == SMOKE_JUDGE_MODEL
    lines = kept["judge_api.env"].splitlines()
    assert lines[0].startswith("# The judge's OpenAI-compatible endpoint (budget: 3 judge calls")
    assert {line.split("=", 1)[0] for line in lines[1:]} == door
    assert f"OPENAI_API_KEY={kept['env:agent']['OPENAI_API_KEY']}" in lines
