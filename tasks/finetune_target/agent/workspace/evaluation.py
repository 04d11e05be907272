"""The judge, as the agent may use it: pairwise comparisons through the harness's judge endpoint.

    from evaluation import Judge
    judge = Judge()
    judge.compare(instruction, response_a, response_b)   # -> "A", "B" or None (the reply ranks neither first)
    judge.compare_many([(instruction, a, b), ...])        # concurrent, order kept

    python evaluation.py [--model submission/model.pt] [--against models/base_model.pt] [--prompts 32]

The command line samples one answer per development prompt from each checkpoint (each with its own
`generation.json` if there is one beside it) and prints the judged win rate of `--model` against `--against`.
The endpoint comes from $OPENAI_BASE_URL or from `judge_api.env` (written by the harness). Every call counts
against your judge-call budget; when it is used up, calls raise `chat.JudgeBudgetExhausted`.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import chat
import model as model_code

HERE = Path(__file__).resolve().parent


class Judge:
    def __init__(self, concurrency: int = 8) -> None:
        self.client = chat.JudgeClient(*chat.endpoint_from_environment(HERE), concurrency=concurrency)

    def compare(self, instruction: str, response_a: str, response_b: str) -> str | None:
        return self.client.compare(instruction, response_a, response_b)[0]

    def compare_many(self, triples: list[tuple[str, str, str]]) -> list[str | None]:
        return [verdict for verdict, _ in self.client.compare_many(triples)]


def settings() -> dict:
    return json.loads((HERE / "data" / "settings.json").read_text())


def tokenizer():
    s = settings()
    return chat.load_tokenizer(s["tokenizer"], s.get("vocabulary"))


def sampling_for(checkpoint: Path) -> chat.SamplingSettings:
    values = dict(settings()["default_sampling"])
    path = checkpoint.parent / "generation.json"
    if path.exists():
        values.update(json.loads(path.read_text()))
    return chat.SamplingSettings(**values)


def answers(checkpoint: Path, prompts: list[str], seed: int) -> list[str]:
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = model_code.load_checkpoint(checkpoint).to(device).eval()
    return chat.generate_responses(model, tokenizer(), prompts, sampling_for(checkpoint), seed=seed)


def main() -> None:
    parser = argparse.ArgumentParser(description="judged win rate of one checkpoint against another")
    parser.add_argument("--model", type=Path, default=HERE / "submission" / "model.pt")
    parser.add_argument("--against", type=Path, default=HERE / "models" / "base_model.pt")
    parser.add_argument("--prompts", type=int, default=32, help="how many development prompts (one judge call each)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    records = chat.read_jsonl(HERE / "data" / "dev_prompts.jsonl")
    rng = random.Random(args.seed)
    records = rng.sample(records, min(args.prompts, len(records)))
    prompts = [r["prompt"] for r in records]
    mine, theirs = answers(args.model, prompts, args.seed), answers(args.against, prompts, args.seed + 1)
    jobs, mine_first = [], []
    for record, a, b in zip(records, mine, theirs):
        first = rng.random() < 0.5
        mine_first.append(first)
        jobs.append((chat.instruction_text(record), a, b) if first else (chat.instruction_text(record), b, a))
    verdicts = Judge().compare_many(jobs)
    # As the scorer counts it: a win is the judge ranking your answer first; an unreadable verdict is a loss.
    points = [float(v == ("A" if f else "B")) for v, f in zip(verdicts, mine_first)]
    print(json.dumps({"win_rate": sum(points) / len(points), "prompts": len(points), "judge_calls": len(jobs)}))


if __name__ == "__main__":
    main()
