"""finetune_target's full image, for the build rehearsal (`rebench images rehearse finetune_target`,
rebench_inspect/tools/rehearsal.py): preparation downloads Alpaca, GPT-2 XL and GPT-2 Alpaca,
and has both models answer the held-out prompts.
"""

from rebench_inspect import HubRepo, generated_documents, parquet_bytes, tiny_gpt2

from .sandbox.prepare import SETTINGS


def alpaca(repo_id: str = "tatsu-lab/alpaca", rows: int = 1200) -> HubRepo:
    """Alpaca's one Parquet file (columns instruction, input, output, text), with generated instructions."""
    documents = generated_documents(rows * 2, seed=52002)
    instructions = [text[:200] for text in documents[:rows]]
    outputs = [text[:300] for text in documents[rows:]]
    inputs = ["" if index % 3 else documents[index][:80] for index in range(rows)]
    texts = [
        f"### Instruction:\n{instruction}\n\n### Input:\n{extra}\n\n### Response:\n{output}"
        for instruction, extra, output in zip(instructions, inputs, outputs, strict=True)
    ]
    columns = {"instruction": instructions, "input": inputs, "output": outputs, "text": texts}
    return HubRepo("dataset", repo_id, {"data/train-00000-of-00001-a09b74b3ef9c3b56.parquet": parquet_bytes(columns)})


def hub_repos() -> list[HubRepo]:
    full = SETTINGS["full"]
    models = [tiny_gpt2(str(full["base_model"]), seed=1), tiny_gpt2(str(full["alpaca_model"]), seed=3)]
    return [alpaca(str(full["dataset"])), *models]
