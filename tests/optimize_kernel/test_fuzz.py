"""Fuzz: malformed messages from the solution's process end in a verdict (issue 21), never a scorer crash.

The solution shares the worker's process, so it can write anything on the channel the scorer reads: here
solution.py writes one prepared frame (hostile JSON, or a broken frame) on that channel while it is imported. Each
run starts the worker (seconds): the fast tier keeps the reproduced faults, the rest runs with `-m slow`."""

from __future__ import annotations

import struct

import pytest

from tests import fuzz_inputs

from .conftest import make_workspace, run_scoring

FORGE_FRAME = """
import os, sys
_fd = int(sys.argv[sys.argv.index("--write-fd") + 1])
os.write(_fd, open({staged!r}, "rb").read())
{after}
def prefix_sum(x):
    return x.cumsum(0).to(x.dtype)
"""


def _framed(variant: fuzz_inputs.Variant) -> fuzz_inputs.Variant:
    def write(path):
        variant.write(path)
        data = path.read_bytes()
        path.write_bytes(struct.pack("<I", len(data)) + data)

    return fuzz_inputs.Variant(variant.name, write, variant.core)


def _raw(name: str, data: bytes) -> fuzz_inputs.Variant:
    return fuzz_inputs.Variant(name, lambda path: path.write_bytes(data))


VARIANTS = [
    *(_framed(v) for v in fuzz_inputs.json_variants({"event": "imported"})),
    _raw("oversized-length", struct.pack("<I", 2**32 - 1)),
    _raw("length-beyond-data", struct.pack("<I", 1000) + b"{}"),
]


@pytest.mark.parametrize("variant", fuzz_inputs.params(VARIANTS))
@pytest.mark.parametrize(
    "after", ["", pytest.param("os._exit(0)", marks=pytest.mark.fuzz)], ids=["then-imported", "then-exit"]
)
def test_malformed_worker_messages_get_a_verdict(tmp_path, variant, after):
    staged = tmp_path / "frame"
    variant.write(staged)
    workspace = make_workspace(tmp_path, FORGE_FRAME.format(staged=str(staged), after=after))
    protected = tmp_path / "protected"
    protected.mkdir()
    completed = run_scoring(workspace, protected, timeout=300)
    result = fuzz_inputs.assert_verdict(completed, protected / "result.json")
    assert not result["valid"]
