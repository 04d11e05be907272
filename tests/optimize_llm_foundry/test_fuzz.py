"""Fuzz: malformed `trained_model/*.safetensors` files end in BadWeights (the scorer's invalid verdict), never
another exception (issue 21). The reader is called directly: a whole scoring run needs the LLM Foundry stack and
minutes per run, and `score.py` turns BadWeights (and only that) into `Invalid`."""

from __future__ import annotations

import json
import struct

import pytest
import torch

from tests import fuzz_inputs
from tests.optimize_llm_foundry.test_scoring import BadWeights, read_weights, write_safetensors

VALID_ENTRY = {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}


def _header_variant(variant: fuzz_inputs.Variant) -> fuzz_inputs.Variant:
    """A safetensors file whose JSON header is the variant's document, followed by 16 bytes of data."""

    def write(path):
        variant.write(path)
        header = path.read_bytes()
        path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))

    return fuzz_inputs.Variant(f"header-{variant.name}", write, variant.core)


def _entry_variant(variant: fuzz_inputs.Variant) -> fuzz_inputs.Variant:
    """A header whose one tensor entry is the variant's document."""

    def write(path):
        variant.write(path)
        header = b'{"weight": ' + path.read_bytes() + b"}"
        path.write_bytes(struct.pack("<Q", len(header)) + header + bytes(16))

    return fuzz_inputs.Variant(f"entry-{variant.name}", write, variant.core)


def _raw(name: str, data: bytes, core: bool = False) -> fuzz_inputs.Variant:
    return fuzz_inputs.Variant(name, lambda path: path.write_bytes(data), core)


def _with_header(header: dict) -> bytes:
    encoded = json.dumps(header).encode()
    return struct.pack("<Q", len(encoded)) + encoded + bytes(16)


VARIANTS = [
    *fuzz_inputs.file_variants(),
    *(_header_variant(v) for v in fuzz_inputs.json_variants()),
    *(_entry_variant(v) for v in fuzz_inputs.json_variants(VALID_ENTRY)),
    _raw("short", b"\x01\x02"),
    _raw("header-length-beyond-file", struct.pack("<Q", 1 << 40) + b"{}", core=True),
    _raw("empty-tensor-of-huge-shape", _with_header({"weight": {**VALID_ENTRY, "shape": [0, 2**62, 4]}}), core=True),
    _raw("overlapping-offsets", _with_header({"weight": {**VALID_ENTRY, "data_offsets": [16, 0]}})),
    _raw("unknown-dtype", _with_header({"weight": {**VALID_ENTRY, "dtype": "I64"}})),
]


@pytest.mark.parametrize("variant", fuzz_inputs.params(VARIANTS))
def test_malformed_weights_are_bad_weights_or_read(tmp_path, variant):
    folder = tmp_path / "trained_model"
    folder.mkdir()
    variant.write(folder / "model.safetensors")
    try:
        tensors = read_weights(folder, 1 << 20)
    except BadWeights as ex:
        assert 0 < len(str(ex)) <= fuzz_inputs.MAX_MESSAGE_CHARS
    else:
        assert all(isinstance(tensor, torch.Tensor) for tensor in tensors.values())


def test_a_valid_file_still_reads(tmp_path):
    write_safetensors(tmp_path / "model.safetensors", {"weight": torch.ones(2, 2)})
    assert torch.equal(read_weights(tmp_path, 1 << 20)["weight"], torch.ones(2, 2))
