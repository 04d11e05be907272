"""The Scaling Law environment's training entry point: the only way an experiment is run, and where the
per-experiment FLOP cap is enforced.

    python -I trainer.py --name NAME < config.py

Preparation installs this file, `scaling_common.py`, and copies of `model.py`/`tokens.py` (tasks/lm_common) in a
root-owned folder beside the protected one, with `trainer_settings.json` (scale, data folder, ledger, mode). The
agent's `train.py` in the workspace is only a launcher that pipes a config file to this program (in containers
as the `rebench-trainer` user through sudo, the only user that may open the GPUs).

The config is read as data, never executed: lines `name = literal`. Only `n_embd` and `max_iters` (plus
`device`, `seed`, `eval_interval`, `wandb_run_name`) may be set; fixed settings may be restated but not changed.
A run over the cap is refused before any training. Every request, refused or not, is appended to the ledger,
and the program prints the run's FLOPs as a fraction of the cap and the running total.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scaling_common import ScaleSettings

# The one sandbox program outside the package form (docs/CONTRACT.md): it runs from its installed folder under a sudo
# rule that pins `python3 -I <folder>/trainer.py`, and -I leaves that folder off the import path. So it puts the
# folder there itself, and its sibling modules (scaling_common, model, tokens) are imported where they are used.
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SETTINGS_FILE = "trainer_settings.json"
TUNABLE = {"n_embd", "max_iters"}
HARMLESS = {"device", "seed", "eval_interval", "wandb_run_name"}
MAX_CONFIG_BYTES = 64 * 1024
# Refusal exit status (the run did not happen); other failures use 1.
REFUSED = 3


class Refused(Exception):
    """The request breaks a rule; nothing was trained."""


def fixed_values(settings: ScaleSettings) -> dict[str, object]:
    return {
        "n_layer": settings.n_layer,
        "n_head": settings.n_head,
        "block_size": settings.block_size,
        "batch_size": settings.batch_size,
        "learning_rate": settings.learning_rate,
        "weight_decay": settings.weight_decay,
        "dropout": 0.0,
        "bias": True,
        "gradient_accumulation_steps": 1,
    }


def parse_config(text: str, settings: ScaleSettings) -> dict[str, object]:
    """`name = literal` assignments only; refuses code, unknown names and changed fixed settings."""
    if len(text.encode()) > MAX_CONFIG_BYTES:
        raise Refused("the config file is too large")
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        raise Refused(f"the config is not valid Python: {error.msg} (line {error.lineno})") from None
    fixed = fixed_values(settings)
    config: dict[str, object] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant):
            continue  # a docstring or a bare string
        if not (
            isinstance(statement, ast.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name)
        ):
            raise Refused(f"line {statement.lineno}: only `name = value` assignments are allowed in the config")
        name = statement.targets[0].id
        try:
            value = ast.literal_eval(statement.value)
        except ValueError:
            raise Refused(f"line {statement.lineno}: the value of {name} must be a literal (no expressions)") from None
        if name in fixed:
            if value != fixed[name] or isinstance(value, bool) != isinstance(fixed[name], bool):
                raise Refused(f"{name} is fixed at {fixed[name]!r} in this task and cannot be changed")
            continue
        if name not in TUNABLE | HARMLESS:
            raise Refused(f"unknown setting {name!r}: only n_embd and max_iters may be chosen")
        config[name] = value
    for name in sorted(TUNABLE):
        value = config.get(name)
        if type(value) is not int or value <= 0:
            raise Refused(f"{name} must be set to a positive integer")
    if not settings.splits_into_heads(config["n_embd"]):  # type: ignore[arg-type]
        raise Refused(f"n_embd must be a multiple of n_head = {settings.n_head}")
    return config


def read_ledger(path: Path) -> list[dict]:
    if not path.exists():
        return []
    entries = []
    for line in path.read_text().splitlines():
        try:
            entries.append(json.loads(line))
        except ValueError:
            continue
    return entries


def append_ledger(path: Path, entry: dict) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(entry) + "\n")


def account(ledger: list[dict], settings: ScaleSettings) -> str:
    from scaling_common import format_flops

    runs = [e for e in ledger if e.get("status") == "started"]  # one "started" line per run that trained
    total = sum(float(e.get("flops", 0.0)) for e in runs)
    return (
        f"experiments so far: {len(runs)} run(s), {format_flops(total)} FLOPs in total "
        f"({total / settings.target_flops:.2%} of the {format_flops(settings.target_flops)}-FLOP target budget)"
    )


def train(config: dict, settings: ScaleSettings, data_dir: Path, log=print) -> dict:
    """Train the fixed model with `config`'s n_embd and max_iters; returns losses. Imports torch lazily."""
    import torch
    from model import GPT, GPTConfig
    from tokens import evaluate_loss, random_batch, read_tokens

    device = str(config.get("device") or ("cuda" if torch.cuda.is_available() else "cpu"))
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise Refused(f"device {device!r} is not available here")
    if device == "cpu":
        torch.set_num_threads(1)  # the smoke scale's tiny models run fastest (and were measured) on one thread
    seed = int(config.get("seed", 1337))
    torch.manual_seed(seed)
    train_tokens, val_tokens = (
        read_tokens(data_dir / "train.bin"),
        read_tokens(data_dir / "val.bin"),
    )
    vocab_size = int((data_dir / "vocab_size").read_text())
    n_embd, max_iters = int(config["n_embd"]), int(config["max_iters"])
    model = GPT(
        GPTConfig(
            vocab_size=vocab_size,
            block_size=settings.block_size,
            n_layer=settings.n_layer,
            n_head=settings.n_head,
            n_embd=n_embd,
        )
    ).to(device)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW(
        [
            {"params": decay, "weight_decay": settings.weight_decay},
            {"params": no_decay, "weight_decay": 0.0},
        ],
        lr=settings.learning_rate,
        betas=(0.9, 0.95),
    )
    warmup = max(1, round(settings.warmup_fraction * max_iters))
    min_lr = settings.learning_rate * settings.min_lr_ratio

    def lr_at(step: int) -> float:
        if step < warmup:
            return settings.learning_rate * (step + 1) / warmup
        progress = (step - warmup) / max(1, max_iters - warmup)
        return min_lr + 0.5 * (1 + math.cos(math.pi * progress)) * (settings.learning_rate - min_lr)

    autocast = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.startswith("cuda"))
    generator = torch.Generator().manual_seed(seed)
    eval_interval = int(config.get("eval_interval") or max(1, max_iters // 10))
    started = time.time()
    train_loss = math.nan
    for step in range(max_iters):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step)
        x, y = random_batch(train_tokens, settings.batch_size, settings.block_size, generator, device)
        with autocast:
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        train_loss = loss.item()
        if (step + 1) % eval_interval == 0 or step + 1 == max_iters:
            log(
                f"step {step + 1}/{max_iters}: train loss {train_loss:.4f}, lr {lr_at(step):.2e}, "
                f"{time.time() - started:.0f}s"
            )
    with autocast:
        val_loss = evaluate_loss(
            model,
            val_tokens,
            n_batches=settings.eval_batches,
            batch_size=settings.batch_size,
            block_size=settings.block_size,
            device=device,
        )
    if not math.isfinite(val_loss):
        val_loss = math.log(vocab_size)  # a diverged run counts as an untrained one
    return {
        "val_loss": val_loss,
        "train_loss": train_loss,
        "seconds": round(time.time() - started, 1),
        "device": device,
    }


def run(config_text: str, name: str, trainer_settings: dict) -> int:
    from scaling_common import SETTINGS, format_flops

    settings = SETTINGS[trainer_settings["scale"]]
    ledger_path = Path(trainer_settings["ledger"])
    entry: dict = {"time": time.time(), "name": name[:100], "user": os.getuid()}
    try:
        config = parse_config(config_text, settings)
    except Refused as refusal:
        append_ledger(ledger_path, {**entry, "status": "refused", "reason": str(refusal)})
        print(f"REFUSED: {refusal}")
        return REFUSED
    n_embd, max_iters = int(config["n_embd"]), int(config["max_iters"])  # type: ignore[call-overload]
    flops = settings.flops(n_embd, max_iters)
    entry.update(
        n_embd=n_embd,
        max_iters=max_iters,
        flops=flops,
        fraction_of_cap=flops / settings.experiment_cap,
    )
    if flops > settings.experiment_cap:
        append_ledger(ledger_path, {**entry, "status": "refused", "reason": "over the cap"})
        print(
            f"REFUSED: n_embd={n_embd}, max_iters={max_iters} needs {format_flops(flops)} FLOPs, "
            f"{flops / settings.experiment_cap:.2f}× the per-experiment cap of {format_flops(settings.experiment_cap)}"
        )
        print(account(read_ledger(ledger_path), settings))
        return REFUSED
    print(
        f"run {name}: n_embd={n_embd}, max_iters={max_iters}: {format_flops(flops)} FLOPs "
        f"({flops / settings.experiment_cap:.1%} of the per-experiment cap, "
        f"{flops / settings.target_flops:.3%} of the target budget)",
        flush=True,
    )
    append_ledger(ledger_path, {**entry, "status": "started"})
    try:
        outcome = train(
            config,
            settings,
            Path(trainer_settings["data_dir"]),
            log=lambda m: print(m, flush=True),
        )
    except Refused as refusal:
        append_ledger(ledger_path, {**entry, "status": "refused", "reason": str(refusal)})
        print(f"REFUSED: {refusal}")
        return REFUSED
    except Exception as error:  # noqa: BLE001 - any failed run (OOM, CUDA error) is recorded and reported
        append_ledger(ledger_path, {**entry, "status": "failed", "reason": repr(error)[:300]})
        print(f"FAILED: {error!r}")
        return 1
    append_ledger(ledger_path, {**entry, "status": "finished", **outcome})
    print(account(read_ledger(ledger_path), settings))
    print(
        "RESULT " + json.dumps({"n_embd": n_embd, "max_iters": max_iters, "flops": flops, **outcome}),
        flush=True,
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Scaling Law training entry point (config on stdin)")
    parser.add_argument("--name", default="run")
    args = parser.parse_args(argv)
    trainer_settings = json.loads((HERE / SETTINGS_FILE).read_text())
    return run(sys.stdin.read(MAX_CONFIG_BYTES + 1), args.name, trainer_settings)


if __name__ == "__main__":
    sys.exit(main())
