"""Read Hugging Face safetensors weights and measure how far two models are apart (torch and sandbox_lib).

The scorer reads the agent's `trained_model/` as root, so this reader trusts nothing in the file: files are read by
`sandbox_lib.untrusted_files` (regular files only, never through a link, bounded) and the header parsed with its
bounds; the header length and every tensor's byte range are checked against the file's size and only numeric
dtypes are accepted. No code in the file is ever executed (safetensors is a JSON header followed by raw
little-endian tensor bytes).
"""

from __future__ import annotations

import math
import os
import stat
import struct
from pathlib import Path

import torch
from sandbox_lib import Invalid
from sandbox_lib.untrusted_files import parse_json, read_regular

DTYPES = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
}
MAX_HEADER_BYTES = 100 * 1024 * 1024
# Elements of one tensor, counting only its non-zero dimensions: an empty tensor's other sizes stay within int64
# strides.
MAX_ELEMENTS = 2**48


class BadWeights(Exception):
    """The folder does not hold readable weights; the message says why (shown to the agent)."""


def _read_regular(path: Path, max_bytes: int) -> bytes:
    try:
        return read_regular(path, path.name, max_bytes=max_bytes)
    except Invalid as ex:
        raise BadWeights(str(ex)) from None


def parse_safetensors(data: bytes, label: str) -> dict[str, torch.Tensor]:
    """Tensors of one safetensors file's bytes; raises BadWeights for anything malformed."""
    if len(data) < 8:
        raise BadWeights(f"{label} is too short to be a safetensors file")
    (header_length,) = struct.unpack("<Q", data[:8])
    if header_length > min(MAX_HEADER_BYTES, len(data) - 8):
        raise BadWeights(f"{label} has an impossible header length")
    try:
        header = parse_json(data[8 : 8 + header_length], f"{label}'s header")
    except Invalid as ex:
        raise BadWeights(str(ex)) from None
    if not isinstance(header, dict):
        raise BadWeights(f"{label} has an unreadable header")
    body = memoryview(data)[8 + header_length :]
    tensors: dict[str, torch.Tensor] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = DTYPES[entry["dtype"]]
            shape = [int(size) for size in entry["shape"]]
            start, end = (int(offset) for offset in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise BadWeights(f"{label}: tensor {name!r} has an unsupported or malformed entry") from None
        count = math.prod(shape)
        element = torch.empty((), dtype=dtype).element_size()
        if (
            min(shape, default=0) < 0
            or math.prod(size for size in shape if size) > MAX_ELEMENTS
            or not 0 <= start <= end <= len(body)
            or end - start != count * element
        ):
            raise BadWeights(f"{label}: tensor {name!r} does not fit the file")
        if count == 0:
            tensors[name] = torch.empty(shape, dtype=dtype)
        else:
            tensors[name] = torch.frombuffer(bytearray(body[start:end]), dtype=dtype).reshape(shape)
    return tensors


def read_weights(folder: Path, max_bytes: int) -> dict[str, torch.Tensor]:
    """Every tensor of the `*.safetensors` files directly in `folder` (a real directory, not a link)."""
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        raise BadWeights(f"{folder.name}/ was not written") from None
    if not stat.S_ISDIR(info.st_mode):
        raise BadWeights(f"{folder.name} is not a directory (links are not followed)")
    files = sorted(path for path in folder.iterdir() if path.name.endswith(".safetensors"))
    if not files:
        raise BadWeights(f"{folder.name}/ holds no .safetensors weights")
    tensors: dict[str, torch.Tensor] = {}
    budget = max_bytes
    for path in files:
        data = _read_regular(path, budget)
        budget -= len(data)
        for name, tensor in parse_safetensors(data, path.name).items():
            if name in tensors:
                raise BadWeights(f"tensor {name!r} appears in more than one file")
            tensors[name] = tensor
    return tensors


def weight_difference(produced: dict[str, torch.Tensor], reference: dict[str, torch.Tensor]) -> float:
    """The paper's measure: the sum over the reference's tensors of the Frobenius norm of (produced - reference),
    computed in float64. Raises BadWeights when the tensor names or shapes differ, or a value is not finite."""
    missing = sorted(set(reference) - set(produced))
    extra = sorted(set(produced) - set(reference))
    if missing or extra:
        raise BadWeights(f"the weights' tensors differ from the model's: missing {missing[:5]}, unexpected {extra[:5]}")
    total = 0.0
    for name, expected in reference.items():
        actual = produced[name]
        if actual.shape != expected.shape:
            raise BadWeights(f"tensor {name!r} has shape {list(actual.shape)}, expected {list(expected.shape)}")
        actual64 = actual.to(torch.float64)
        if not torch.isfinite(actual64).all():
            raise BadWeights(f"tensor {name!r} holds NaN or infinite values")
        total += torch.linalg.vector_norm(actual64 - expected.to(torch.float64)).item()
    return total
