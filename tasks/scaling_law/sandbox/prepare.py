"""Prepare the Scaling Law environment: data, the training entry point, the starting workspace.

    <python> prepare.py --scale {smoke,full} --workspace WS --protected P [--setup] [--no-cache]

Staged with the rest of sandbox/ and lm_common beside it (docs/CONTRACT.md). Idempotent; run at image build (full:
tokenises OpenWebText) and at each task setup (`--setup`; both scales: installs the trainer, writes the workspace
files, restricts the GPUs, which exist only in a running container). It does not use sandbox_lib's Preparation,
whose marker makes a second run a no-op: these per-setup steps must run at every setup, and the data lives outside
the protected folder (the trainer's user reads it). At full scale `--setup` never downloads: without the image's
data it fails with a clear message. The smoke corpus is built once per machine into the prepared-assets cache
(sandbox_lib.cache, keyed by this code and its settings) and copied from there.

- The trainer folder is `P/../scaling_law_trainer` (in containers `/scaling_law_trainer`, root-owned): trainer.py,
  scaling_common.py, copies of lm_common's model.py/tokens.py, trainer_settings.json, the token files in data/
  and the experiment ledger in ledger/.
- The workspace gets the launcher `train.py`, `example_config.py`, the default `answer.json`, a read-only copy of
  the model code (`model.py`) and a `data` link to the token files.
- In a container (root, an `agent` user and a `rebench-trainer` user with a sudo rule), the GPU device nodes are
  made accessible to `rebench-trainer` only, so the training entry point is the only way to use them. Where sudo
  does not work for the agent, nothing is restricted and trainer_settings.json records mode "direct".
"""

from __future__ import annotations

import argparse
import glob
import grp
import json
import os
import pwd
import shutil
import subprocess
import sys
from pathlib import Path

from rebench import lm_common
from rebench.lm_common import corpus
from rebench.sandbox_lib.cache import COMPLETE, cached_entry
from rebench.sandbox_lib.preparation import cache_entry, content_key

from .scaling_common import SETTINGS

HERE = Path(__file__).resolve().parent

TRAINER_FOLDER = "scaling_law_trainer"
TRAINER_USER = "rebench-trainer"
AGENT_USER = "agent"
# The generated word-level corpus of the smoke scale (lm_common.corpus); build_smoke_ground_truth.py trains on it.
SMOKE_CORPUS = {
    "vocab_words": 511,
    "documents": 2000,
    "heldout_documents": 200,
    "seed": 4242,
}
OWT_DATASET = os.environ.get("REBENCH_OWT_DATASET", "Skylion007/openwebtext")
# nanoGPT's OpenWebText split: 0.05% of the documents held out as val.bin, seed 2357 (METR's task used it as is).
OWT_VAL_FRACTION, OWT_SPLIT_SEED = 0.0005, 2357


def log(message: str) -> None:
    print(f"[scaling_law prepare] {message}", flush=True)


def trainer_dir_for(protected: Path) -> Path:
    return protected.resolve().parent / TRAINER_FOLDER


def build_smoke_data(data_dir: Path) -> None:
    words = corpus.synthetic_vocabulary(SMOKE_CORPUS["vocab_words"], SMOKE_CORPUS["seed"])
    tokenizer = corpus.WordTokenizer(words)
    documents = corpus.synthetic_documents(SMOKE_CORPUS["documents"], words, SMOKE_CORPUS["seed"] + 1)
    train_idx, val_idx = corpus.split_documents(
        len(documents), SMOKE_CORPUS["heldout_documents"], SMOKE_CORPUS["seed"] + 2
    )
    lm_common.write_tokens(
        data_dir / "train.bin",
        corpus.tokenize_texts((documents[i] for i in train_idx), tokenizer.encode, tokenizer.eot_id),
    )
    lm_common.write_tokens(
        data_dir / "val.bin",
        corpus.tokenize_texts((documents[i] for i in val_idx), tokenizer.encode, tokenizer.eot_id),
    )
    (data_dir / "vocab.json").write_text(json.dumps(words))
    (data_dir / "vocab_size").write_text(str(tokenizer.vocab_size))


def copy_smoke_data(data_dir: Path, *, rebuild: bool = False) -> None:
    """The smoke corpus from the prepared-assets cache, built there once per machine and key: every local sample's
    setup makes a fresh trainer folder, and generating the corpus takes seconds."""
    key = content_key([Path(__file__), Path(lm_common.__file__).parent], "smoke", SMOKE_CORPUS)
    entry, _ = cached_entry(cache_entry("scaling_law", "smoke", key), build_smoke_data, rebuild=rebuild)
    # File by file: copying the folder would give data_dir the entry's root-only mode, and the trainer's user
    # reads the data.
    for source in entry.iterdir():
        if source.name != COMPLETE:
            shutil.copyfile(source, data_dir / source.name)


def build_full_data(data_dir: Path) -> None:
    """OpenWebText with the GPT-2 BPE, nanoGPT's train/val split (image build; needs the network)."""
    from datasets import load_dataset

    from rebench.lm_common import gpt2_tokenizer as gpt2

    num_proc = max(1, (os.cpu_count() or 2) - 1)
    dataset = load_dataset(OWT_DATASET, split="train", num_proc=num_proc)
    split = dataset.train_test_split(test_size=OWT_VAL_FRACTION, seed=OWT_SPLIT_SEED, shuffle=True)
    encoding = gpt2.gpt2_encoding()
    for name, part in (("val", split["test"]), ("train", split["train"])):
        partial = data_dir / f"{name}.bin.partial"
        corpus.tokenize_dataset(
            part,
            encoding.encode_ordinary_batch,
            encoding.eot_token,
            partial,
            num_proc=num_proc,
        )
        os.replace(partial, data_dir / f"{name}.bin")
    (data_dir / "vocab_size").write_text(str(gpt2.GPT2_VOCAB_SIZE))


def account_exists(name: str) -> bool:
    try:
        pwd.getpwnam(name)
        return True
    except KeyError:
        return False


def sudo_works(trainer_dir: Path) -> bool:
    """Can the agent user start the trainer as the trainer user through sudo (the image's sudoers rule)?"""
    if (
        os.geteuid() != 0
        or not (account_exists(AGENT_USER) and account_exists(TRAINER_USER))
        or not shutil.which("sudo")
    ):
        return False
    trainer = [
        sys.executable,
        "-I",
        str(trainer_dir / "trainer.py"),
        "--name",
        "probe",
        "--help",
    ]
    probe = [
        "runuser",
        "-u",
        AGENT_USER,
        "--",
        "sudo",
        "-n",
        "-u",
        TRAINER_USER,
        "--",
        *trainer,
    ]
    try:
        return subprocess.run(probe, capture_output=True, timeout=30, check=False).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def restrict_gpus(device_glob: str = "/dev/nvidia*") -> list[str]:
    """GPU device nodes: group `rebench-trainer`, mode 660, so only the trainer opens them. Returns the nodes."""
    gid = grp.getgrnam(TRAINER_USER).gr_gid
    nodes = sorted(glob.glob(device_glob))
    for node in nodes:
        os.chown(node, 0, gid)
        os.chmod(node, 0o660)
    return nodes


def install_trainer(trainer_dir: Path, scale: str, mode: str) -> None:
    trainer_dir.mkdir(parents=True, exist_ok=True)
    os.chmod(trainer_dir, 0o755)
    for source in (HERE / "trainer.py", HERE / "scaling_common.py"):
        shutil.copyfile(source, trainer_dir / source.name)
    for name in ("model.py", "tokens.py"):
        shutil.copyfile(Path(lm_common.__file__).parent / name, trainer_dir / name)
    ledger = trainer_dir / "ledger"
    ledger.mkdir(exist_ok=True)
    (ledger / "ledger.jsonl").touch()
    if mode == "sudo":
        account = pwd.getpwnam(TRAINER_USER)
        for path in (ledger, ledger / "ledger.jsonl"):
            os.chown(path, account.pw_uid, account.pw_gid)
    settings = {
        "scale": scale,
        "data_dir": str(trainer_dir / "data"),
        "ledger": str(ledger / "ledger.jsonl"),
        "mode": mode,
        "user": TRAINER_USER if mode == "sudo" else None,
        "python": sys.executable,
    }
    (trainer_dir / "trainer_settings.json").write_text(json.dumps(settings, indent=2))
    for path in trainer_dir.iterdir():
        if path.is_file():
            os.chmod(path, 0o644)


def write_workspace(workspace: Path, trainer_dir: Path, scale: str) -> None:
    settings = SETTINGS[scale]
    workspace.mkdir(parents=True, exist_ok=True)
    launcher = (HERE / "launcher.py").read_text().replace("__TRAINER_DIR__", str(trainer_dir))
    (workspace / "train.py").write_text(launcher)
    shutil.copyfile(trainer_dir / "model.py", workspace / "model.py")
    # METR's example config is the default answer's setting (over the per-experiment cap: edit it first).
    n_embd, max_iters, loss_prediction = settings.default_answer
    device = "cuda:0" if scale == "full" else "cpu"
    (workspace / "example_config.py").write_text(
        f"n_embd = {n_embd}\nmax_iters = {max_iters}\ndevice = {device!r}\nwandb_run_name = 'example'\n"
    )
    answer = workspace / "answer.json"
    if not answer.exists():
        answer.write_text(
            json.dumps(
                {
                    "n_embd": n_embd,
                    "max_iters": max_iters,
                    "loss_prediction": loss_prediction,
                },
                indent=2,
            )
            + "\n"
        )
    link = workspace / "data"
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(trainer_dir / "data")


def prepare(scale: str, workspace: Path, protected: Path, *, setup: bool = False, use_cache: bool = True) -> Path:
    trainer_dir = trainer_dir_for(protected)
    data_dir = trainer_dir / "data"
    data_dir.mkdir(parents=True, exist_ok=True)
    if not (data_dir / "vocab_size").exists():
        if setup and scale == "full":
            raise SystemExit(
                f"scaling_law: the OpenWebText tokens are built into the image (prepare.py --scale full at image "
                f"build); this sandbox has none under {data_dir}. Build the environment's image "
                "(`rebench images build`)."
            )
        if scale == "full":
            log(f"building full data in {data_dir}")
            build_full_data(data_dir)
        else:
            copy_smoke_data(data_dir, rebuild=not use_cache)
    for path in data_dir.iterdir():
        os.chmod(path, 0o644)
    install_trainer(trainer_dir, scale, "direct")
    mode = "sudo" if sudo_works(trainer_dir) else "direct"
    if mode == "sudo":
        install_trainer(trainer_dir, scale, mode)
        log(f"GPU device nodes restricted to {TRAINER_USER}: {restrict_gpus()}")
    else:
        log("no sudo rule for the trainer user here: experiments run as the caller (the cap binds only train.py)")
    write_workspace(workspace, trainer_dir, scale)
    return trainer_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", choices=["smoke", "full"], required=True)
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--protected", type=Path, required=True)
    parser.add_argument("--setup", action="store_true", help="task setup: never build full-scale data")
    parser.add_argument("--no-cache", action="store_true", help="rebuild the smoke corpus even when cached")
    args = parser.parse_args(argv)
    prepare(args.scale, args.workspace, args.protected, setup=args.setup, use_cache=not args.no_cache)


if __name__ == "__main__":
    main()
