"""Deterministic offline judge for smoke runs: `rebench_smoke/judge` (`rebench_inspect.runtime.smoke` serves it).

It reads this environment's judge request (the original task's ranking prompt, `chat_common.judge_messages`:
the instruction and the two answers as JSON strings after `"prompt":` and `"answer":`), gives each answer a quality
score and replies as the real judge is asked to, with a JSON ranking:

    [{"model": "model_1", "rank": 1}, {"model": "model_2", "rank": 2}]

The quality rewards, in order of weight, what a real judge rewards in the smoke world's word-level answers:

    quality = −10 if the answer is garbled (it spills the prompt's scaffolding: `###`, `:`, line breaks, the Alpaca
                 frame's words such as "instruction" or "response"; two or more such tokens, or one in ten)
            + 2 × (distinct words of ≥ 5 letters from the instruction that the answer names, at most 2; relevance)
            + (courtesy words such as "sure" or "glad", at most 2; a helpful tone)
            + (1 if the answer has 3–40 words, else −2)

So coherent text beats noise whatever else it holds (the −10 outweighs all the other terms together): an
untrained, randomly initialised model (which emits prompt
scaffolding and runs to the length limit) scores below the starting model, as it would before a real judge; the
comparison "gpt2-alpaca" stand-in (answers that name the topic, politely) usually beats the start; and fine-tuning on
judge-selected samples (the reference solution) learns relevance and tone within a CPU minute. On equal quality the
answer shown first wins (a position bias, as real judges have, which the scorer's randomised positions average out).
A request it cannot read gets a reply that ranks neither answer, which the scorer counts as a loss.

Never a default at full scale.
"""

import json
import re

from rebench_inspect import register_smoke_model, smoke_custom_outputs

COURTESY_WORDS = frozenset({"sure", "glad", "thanks", "certainly", "hope"})
INSTRUCTION_VERBS = frozenset(
    {
        "describe",
        "explain",
        "write",
        "about",
        "three",
        "words",
        "related",
        "things",
        "sentence",
        "short",
        "using",
        "which",
        "would",
        "there",
        "their",
        "below",
        "response",
        "instruction",
        "give",
    }
)
# Words of the Alpaca prompt frame ("Below is an instruction that describes a task ... ### Response:").
FRAME_WORDS = frozenset(
    {
        "below",
        "instruction",
        "describes",
        "task",
        "write",
        "response",
        "appropriately",
        "completes",
        "request",
        "input",
        "paired",
        "provides",
        "further",
        "context",
    }
)
UNREADABLE_REPLY = "I cannot rank these answers."
_PIECES = re.compile(r"\n|###|[A-Za-z0-9']+|[^\sA-Za-z0-9']")
_SCAFFOLDING = frozenset({"\n", "###", ":"})
_DECODER = json.JSONDecoder()


def _pieces(text: str) -> list[str]:
    return _PIECES.findall(text)


def quality(instruction: str, answer: str) -> float:
    pieces = _pieces(answer)
    words = [p.lower() for p in pieces if p[:1].isalnum()]
    junk = sum(1 for p in pieces if p in _SCAFFOLDING or p.lower() in FRAME_WORDS)
    garbled = junk >= 2 or (junk > 0 and junk * 10 >= len(pieces))
    topic = {w for w in re.findall(r"[a-z]+", instruction.lower()) if len(w) >= 5 and w not in INSTRUCTION_VERBS}
    relevance = 2.0 * min(2, len(topic & set(words)))
    courtesy = min(2, sum(1 for w in words if w in COURTESY_WORDS))
    length = 1.0 if 3 <= len(words) <= 40 else -2.0
    return (-10.0 if garbled else 0.0) + relevance + courtesy + length


def read_request(prompt: str) -> tuple[str, str, str] | None:
    """(instruction, answer of model_1, answer of model_2) from the judge request, or None."""
    values = []
    position = 0
    for key in ('"prompt": ', '"answer": ', '"answer": '):
        found = prompt.find(key, position)
        if found < 0:
            return None
        try:
            value, position = _DECODER.raw_decode(prompt, found + len(key))
        except json.JSONDecodeError:
            return None
        if not isinstance(value, str):
            return None
        values.append(value)
    return values[0], values[1], values[2]


def judge_reply(prompt: str) -> str:
    """The smoke judge's reply to one request: a JSON ranking, or a refusal when the request is unreadable."""
    request = read_request(prompt)
    if request is None:
        return UNREADABLE_REPLY
    instruction, first, second = request
    second_wins = quality(instruction, second) > quality(instruction, first) + 1e-9
    ranks = {"model_1": 2 if second_wins else 1, "model_2": 1 if second_wins else 2}
    return json.dumps([{"model": name, "rank": rank} for name, rank in sorted(ranks.items(), key=lambda kv: kv[1])])


def judge_replies(prompt: str, choices: int) -> list[str]:
    """One reply, however many choices are asked for (the scorer asks for one)."""
    return [judge_reply(prompt)]


SMOKE_JUDGE_MODEL = register_smoke_model("judge", judge_replies)
# The same judge as a `mockllm/model` `custom_outputs` callable.
smoke_judge_custom_outputs = smoke_custom_outputs("judge")
