"""Read an untrusted checkpoint as data and check it against the harness's model (torch + standard library only).

Self-contained on purpose: `checkpoints.load_untrusted_checkpoint` copies this one file where the agent user can
read it and runs it in a process of that user's, with a memory cap:

    python -I weights.py SOURCE RULES_JSON OUTPUT_DIR

It opens SOURCE without following links, refuses anything but a regular file, refuses zip entries that are
compressed (torch.save never compresses; a compressed entry is how a small file inflates in memory), loads it with
`torch.load(weights_only=True)` (pickled code is refused, never run), checks names, shapes, dtypes and finiteness
against the rules, and writes the plain tensors to OUTPUT_DIR/clean.pt and a verdict to OUTPUT_DIR/report.json.
The scoring process re-reads clean.pt with `read_checked_state`, which applies the same checks again.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import stat
import sys
import zipfile
from pathlib import Path
from typing import IO, Any

import torch

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK


class Invalid(Exception):
    """The checkpoint is not acceptable; the message is shown to the agent."""


def _element_bytes(dtype: str | None) -> int:
    return 8 if dtype is None else torch.empty((), dtype=getattr(torch, dtype)).element_size()


def max_checkpoint_bytes(rules: dict[str, Any]) -> int:
    """The largest file an acceptable checkpoint can be: every parameter stored once, plus container overhead."""
    numbers = sum(math.prod(shape) * _element_bytes(dtype) for shape, dtype in rules["parameters"].values())
    return numbers + 16 * 1024 * 1024 + 4096 * len(rules["parameters"])


def open_regular(path: Path, label: str) -> IO[bytes]:
    """Open a file the agent controls: never through a link, never a pipe or device."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except FileNotFoundError:
        raise Invalid(f"{label} not found") from None
    except PermissionError:
        raise Invalid(f"{label} cannot be read by the agent's user") from None
    except OSError as ex:
        if os.path.islink(path):
            raise Invalid(f"{label} is a symbolic link; save the checkpoint itself at that path") from None
        raise Invalid(f"{label} cannot be opened ({ex.strerror})") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(mode) else "a pipe, socket or device"
        raise Invalid(f"{label} is not a regular file ({kind})")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def check_container(file: IO[bytes], label: str, max_bytes: int) -> None:
    """Bound the file and, for the zip format torch.save writes, every entry's stored and inflated size."""
    size = os.fstat(file.fileno()).st_size
    if size > max_bytes:
        raise Invalid(f"{label} is larger than the {max_bytes} bytes a checkpoint of this model can need")
    if not zipfile.is_zipfile(file):
        file.seek(0)
        return  # the legacy format: raw storages after a pickle, bounded by the file size
    try:
        entries = zipfile.ZipFile(file).infolist()
    except (zipfile.BadZipFile, OSError, ValueError):
        raise Invalid(f"{label} is corrupted or not a torch.save file (unreadable zip directory)") from None
    if any(entry.compress_type != zipfile.ZIP_STORED for entry in entries):
        raise Invalid(f"{label} holds compressed entries (torch.save never compresses them); refused")
    if sum(entry.file_size for entry in entries) > max_bytes:
        raise Invalid(f"{label} would inflate beyond the {max_bytes} bytes a checkpoint of this model can need")
    file.seek(0)


def load_weights_only(file: IO[bytes], label: str) -> Any:
    try:
        return torch.load(file, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as ex:
        text = str(ex).splitlines()[0][:300] if str(ex) else type(ex).__name__
        raise Invalid(
            f"{label} cannot be loaded as weights only: it is corrupted, or it holds objects other than tensors and "
            f"plain containers (loading those would run code); save a state dict of tensors. Loader said: {text}"
        ) from None
    except MemoryError:
        raise
    except Exception as ex:  # noqa: BLE001 - any other failure means the file is not a readable checkpoint
        text = str(ex).splitlines()[0][:200] if str(ex) else ""
        raise Invalid(f"{label} is corrupted or not a torch.save file ({type(ex).__name__}: {text})") from None


def extract_state(obj: Any, rules: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The state dict inside a checkpoint: bare, or under one of the rules' container keys; wrapper prefixes off."""
    label, notes = rules["label"], []
    containers = list(rules.get("containers", []))
    if not isinstance(obj, dict):
        expected = f"a state dict of tensors or a dict with one of the keys {containers}"
        raise Invalid(f"{label} holds a {type(obj).__name__}, expected {expected}")
    config = rules.get("config")
    if config is not None and isinstance(obj.get("config"), dict) and obj["config"] != config:
        raise Invalid(f"wrong architecture: the checkpoint's config {obj['config']} differs from the original {config}")
    if not all(isinstance(value, torch.Tensor) for value in obj.values()):
        key = next((k for k in containers if isinstance(obj.get(k), dict)), None)
        if key is None:
            raise Invalid(
                f"{label}: no state dict found: expected a dict of tensors or a dict with one of the keys {containers}"
            )
        notes.append(f"state dict taken from key {key!r}")
        obj = obj[key]
    state: dict[str, Any] = {}
    for name, value in obj.items():
        if not isinstance(name, str):
            raise Invalid(f"{label}: state dict keys must be strings")
        clean = name
        for prefix in rules.get("strip_prefixes", []):
            while clean.startswith(prefix):
                clean = clean[len(prefix) :]
        if clean != name and "wrapper prefixes stripped" not in notes:
            notes.append("wrapper prefixes stripped")
        if clean in state:
            raise Invalid(f"{label}: parameter {clean!r} appears twice")
        state[clean] = value
    if rules.get("fill_tied"):
        for first, second in rules.get("tied", []):
            if second not in state and first in state:
                state[second] = state[first]
    return state, notes


def check_state(state: dict[str, Any], rules: dict[str, Any]) -> None:
    """Exactly the expected parameters, each a dense finite tensor of the expected shape and dtype; ties hold."""
    expected = rules["parameters"]
    missing, extra = sorted(set(expected) - set(state)), sorted(set(state) - set(expected))
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing parameters {missing[:5]}{' ...' if len(missing) > 5 else ''}")
        if extra:
            parts.append(f"unexpected parameters {extra[:5]}{' ...' if len(extra) > 5 else ''}")
        raise Invalid("wrong architecture: " + "; ".join(parts))
    for name, (shape, dtype) in expected.items():
        tensor = state[name]
        if not isinstance(tensor, torch.Tensor):
            raise Invalid(f"{name} is not a tensor")
        if tensor.layout != torch.strided or tensor.is_quantized or tensor.is_meta:
            raise Invalid(f"{name} must be a plain dense tensor")
        if list(tensor.shape) != list(shape):
            raise Invalid(f"wrong architecture: {name} has shape {list(tensor.shape)}, the original has {list(shape)}")
        if dtype is None and not tensor.is_floating_point():
            raise Invalid(f"wrong architecture: {name} is not a floating-point tensor")
        if dtype is not None and str(tensor.dtype).removeprefix("torch.") != dtype:
            raise Invalid(f"{name} has dtype {tensor.dtype}, the original has {dtype}")
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            raise Invalid(f"{name} holds NaN or infinite values")
    for first, second in rules.get("tied", []):
        if not torch.equal(state[first].float(), state[second].float()):
            raise Invalid(f"{second} must equal {first} (the embedding is tied in the original model)")


def read_checked_state(path: Path, rules: dict[str, Any]) -> dict[str, Any]:
    """Open, bound, load as weights only and check: the tensors of an acceptable checkpoint, or `Invalid`."""
    with open_regular(path, rules["label"]) as file:
        check_container(file, rules["label"], rules.get("max_bytes") or max_checkpoint_bytes(rules))
        obj = load_weights_only(file, rules["label"])
    state, _ = extract_state(obj, rules)
    check_state(state, rules)
    return state


def _worker(argv: list[str]) -> int:
    source, rules_path, output = Path(argv[0]), Path(argv[1]), Path(argv[2])
    rules = json.loads(rules_path.read_text())
    try:
        with open_regular(source, rules["label"]) as file:
            check_container(file, rules["label"], rules.get("max_bytes") or max_checkpoint_bytes(rules))
            obj = load_weights_only(file, rules["label"])
        state, notes = extract_state(obj, rules)
        check_state(state, rules)
        clean = {name: state[name].detach().contiguous().clone() for name in rules["parameters"]}
        torch.save(clean, output / "clean.pt")
        report: dict[str, Any] = {"valid": True, "notes": notes}
    except Invalid as ex:
        report = {"valid": False, "message": str(ex)}
    except MemoryError:
        report = {"valid": False, "message": f"loading {rules['label']} needed more memory than this model can"}
    (output / "report.json").write_text(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(_worker(sys.argv[1:]))
