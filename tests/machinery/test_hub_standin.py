"""Full-scale preparation against the rehearsal's stand-in for the Hugging Face hub (rebench_inspect/tools/hub_standin.py):
the real download code (datasets, huggingface_hub) fetches the stand-in's files over HTTP, and the preparation
produces the files the environment's programs read, as the full image's build does in `rebench images rehearse`."""

import json
import os
import urllib.error
import urllib.request

import numpy as np
import pytest

from rebench.environments import ENVIRONMENTS
from rebench.lm_common import gpt2_tokenizer
from rebench_inspect.testing.programs import run_preparation, run_scoring_program
from rebench_inspect.tools.hub_standin import HubRepo, assets_for, openwebtext, serve_hub


def hub_environment(endpoint: str, home) -> dict[str, str]:
    """The build's environment for preparation: the hub is the stand-in, its cache a fresh folder."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
    return {**env, "HF_ENDPOINT": endpoint, "HF_HOME": str(home)}


def test_the_stand_in_answers_downloads_with_ranges_and_records_what_it_lacks():
    repo = HubRepo("model", "org/tiny", {"config.json": b'{"a": 1}', "weights/part.bin": b"0123456789"})
    with serve_hub([repo]) as (endpoint, hub):
        with urllib.request.urlopen(f"{endpoint}/org/tiny/resolve/main/config.json") as answer:
            assert json.loads(answer.read()) == {"a": 1}
            assert answer.headers["X-Repo-Commit"]
        ranged = urllib.request.Request(
            f"{endpoint}/org/tiny/resolve/main/weights/part.bin", headers={"Range": "bytes=2-4"}
        )
        with urllib.request.urlopen(ranged) as answer:
            assert answer.status == 206 and answer.read() == b"234"
        with urllib.request.urlopen(f"{endpoint}/api/models/org/tiny/tree/main?recursive=true") as answer:
            listing = json.loads(answer.read())
        assert {entry["path"] for entry in listing} == {"config.json", "weights", "weights/part.bin"}
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(f"{endpoint}/org/tiny/resolve/main/absent.json")
        assert missing.value.code == 404 and missing.value.headers["X-Error-Code"] == "EntryNotFound"
        assert hub.missed == ["GET /org/tiny/resolve/main/absent.json"]


def test_openwebtext_stand_in_has_the_hubs_parquet_layout():
    repo = openwebtext()
    assert repo.kind == "dataset" and repo.repo_id == "Skylion007/openwebtext"
    assert sorted(repo.files) == [
        "plain_text/train-00000-of-00080.parquet",
        "plain_text/train-00001-of-00080.parquet",
    ]
    assert all(content[:4] == b"PAR1" for content in repo.files.values())


def prepare_from_the_stand_in(name: str, tmp_path) -> tuple[object, list[str]]:
    """Run `name`'s full-scale preparation as the image build does (staged tree, no setup) against the stand-in;
    returns the finished process and the requests the stand-in answered."""
    workspace, protected = tmp_path / "home" / "workspace", tmp_path / "home" / "protected"
    with serve_hub(assets_for(ENVIRONMENTS[name])) as (endpoint, hub):
        prepared = run_preparation(
            ENVIRONMENTS[name],
            workspace,
            protected,
            scale="full",
            setup=False,
            env=hub_environment(endpoint, tmp_path / "hf"),
            timeout=900,
        )
    assert prepared.returncode == 0, prepared.stdout[-2000:] + prepared.stderr[-3000:]
    return prepared, hub.served


def test_full_scale_scaling_law_preparation_from_the_stand_in_makes_what_the_trainer_and_scorer_read(tmp_path):
    _, served = prepare_from_the_stand_in("scaling_law", tmp_path)
    # The real download path: the hub's API, then each Parquet shard over HTTP.
    assert len([request for request in served if request.startswith("GET ") and ".parquet" in request]) == 2
    data = tmp_path / "home" / "scaling_law_trainer" / "data"
    assert (data / "vocab_size").read_text() == str(gpt2_tokenizer.GPT2_VOCAB_SIZE)
    train = np.fromfile(data / "train.bin", dtype="<u2")
    val = np.fromfile(data / "val.bin", dtype="<u2")
    # Every stand-in document became GPT-2 tokens followed by the end-of-text token, split by document.
    texts = [text for content in openwebtext().files.values() for text in _parquet_texts(content)]
    encoding = gpt2_tokenizer.gpt2_encoding()
    assert len(train) + len(val) == sum(len(encoding.encode_ordinary(text)) + 1 for text in texts)
    assert (train == gpt2_tokenizer.EOT_ID).sum() + (val == gpt2_tokenizer.EOT_ID).sum() == len(texts)
    assert len(val) > 0 and val[-1] == gpt2_tokenizer.EOT_ID
    assert train.max() < gpt2_tokenizer.GPT2_VOCAB_SIZE
    # The workspace the agent starts from, and a verdict of the scoring program on it at full scale.
    workspace, protected = tmp_path / "home" / "workspace", tmp_path / "home" / "protected"
    assert {"train.py", "answer.json", "example_config.py", "model.py", "data"} <= {p.name for p in workspace.iterdir()}
    scored = run_scoring_program(ENVIRONMENTS["scaling_law"], workspace, protected, scale="full")
    assert scored.returncode == 0, scored.stderr[-2000:]
    assert json.loads((protected / "result.json").read_text())["valid"] in (True, False)


def test_full_scale_restricted_mlm_preparation_from_the_stand_in_makes_the_held_out_tokens(tmp_path):
    prepare_from_the_stand_in("restricted_mlm", tmp_path)
    workspace, protected = tmp_path / "home" / "workspace", tmp_path / "home" / "protected"
    meta = json.loads((protected / "meta.json").read_text())  # what the scorer opens first
    val = np.fromfile(protected / "val.bin", dtype="<u2")
    assert meta["val_tokens"] == len(val) > 0 and meta["train_tokens"] == len(
        np.fromfile(workspace / "data" / "train.bin", dtype="<u2")
    )
    assert (val == gpt2_tokenizer.EOT_ID).sum() == 4000  # the held-out documents, each ended by end-of-text
    assert (workspace / "data" / "info.json").is_file() and (workspace / "solution" / "masking.py").is_file()


def test_full_scale_rust_codecontests_preparation_from_the_stand_in_holds_out_the_test_split(tmp_path):
    prepare_from_the_stand_in("rust_codecontests", tmp_path)
    workspace, protected = tmp_path / "home" / "workspace", tmp_path / "home" / "protected"
    test = json.loads((protected / "data" / "test_problems.json").read_text())  # what the scorer reads
    dev = json.loads((workspace / "data" / "dev_problems.json").read_text())
    assert len(test) == 165 and dev
    assert not {problem["name"] for problem in test} & {problem["name"] for problem in dev}
    assert all("solutions" not in problem for problem in test + dev)


def _parquet_texts(content: bytes) -> list[str]:
    import io

    import pyarrow.parquet as pq

    return pq.read_table(io.BytesIO(content)).column("text").to_pylist()


def test_full_scale_llm_foundry_preparation_downloads_the_base_model_from_the_stand_in(tmp_path):
    from rebench.optimize_llm_foundry.sandbox import stack

    if stack.stack_problem():
        pytest.skip(stack.stack_problem())
    _, served = prepare_from_the_stand_in("optimize_llm_foundry", tmp_path)
    workspace, protected = tmp_path / "home" / "workspace", tmp_path / "home" / "protected"
    # snapshot_download by the full scale's patterns: config and tokenizer files, then the safetensors weights.
    assert any("model.safetensors" in request for request in served)
    for folder in (protected / "base_model", workspace / "base_model"):
        assert {"config.json", "tokenizer.json", "model.safetensors"} <= {path.name for path in folder.iterdir()}
    meta = json.loads((protected / "meta.json").read_text())
    assert meta["base_model"]["source"] == "deepseek-ai/deepseek-coder-1.3b-base@main"
    assert len((protected / "heldout" / "train_data.jsonl").read_text().splitlines()) == 1000


# Slow tier: evaluating GPT-2-vocabulary models on 1024-token windows takes about 2 minutes on 2 cores.
@pytest.mark.slow
def test_full_scale_fix_embedding_preparation_from_the_stand_in_converts_the_gpt2_models(tmp_path):
    from rebench.fix_embedding.sandbox import prepare

    _, served = prepare_from_the_stand_in("fix_embedding", tmp_path)
    workspace, protected = tmp_path / "home" / "workspace", tmp_path / "home" / "protected"
    for repo in ("openai-community/gpt2-xl", "openai-community/gpt2"):
        assert any(f"/{repo}/resolve/" in request and "model.safetensors" in request for request in served), repo
    assert set(prepare.WORKSPACE_FILES) <= {path.name for path in workspace.iterdir()}
    assert set(prepare.PROTECTED_FILES) <= {path.name for path in protected.iterdir()}


# Rehearsal tier (not CI's): two models answer 2 x 512 held-out prompts (GPT-2's vocabulary on a CPU): about 15
# minutes on 2 cores.
@pytest.mark.rehearsal
def test_full_scale_finetune_target_preparation_from_the_stand_in_writes_the_held_out_prompts(tmp_path):
    from rebench.finetune_target.sandbox import prepare

    _, served = prepare_from_the_stand_in("finetune_target", tmp_path)
    protected = tmp_path / "home" / "protected"
    assert any("/datasets/tatsu-lab/alpaca/resolve/" in request for request in served)
    assert any("/vicgalle/gpt2-alpaca/resolve/" in request for request in served)
    assert set(prepare.PROTECTED_FILES) <= {path.name for path in protected.iterdir()}
    assert len((protected / "heldout.jsonl").read_text().splitlines()) == prepare.SETTINGS["full"]["heldout_prompts"]
