"""Shared by the scoring program (trusted parent) and its worker (the child that imports the solution).

Holds the per-scale settings (the step time limits are the scorer's own: `score.TIMEOUTS_S`), the deterministic
input generator, the reference computation and the length-prefixed message framing used on the pipes between the
two processes. THREAT_MODEL.md says which of these the parent trusts (only its own copies).
"""

import json
import os
import select
import struct
import time
from collections.abc import Callable
from typing import Any

import numpy as np

# One code path for both scales; only these numbers differ.
SCALES: dict[str, dict[str, Any]] = {
    "full": {
        "device": "cuda",
        "n": 100_000_000,
        "check_sizes": [1000, 1_000_003],
        "warmups": 4,
        "trials": 5,
        # Reading 400 MB and writing 400 MB faster than ~5 TB/s is physically impossible on one GPU.
        "min_ms": 0.16,
        "interpret": False,
        "cpu_threads": None,  # PyTorch's default
        "malloc_env": {},
    },
    "smoke": {
        "device": "cpu",
        "n": 1_000_000,
        "check_sizes": [1000, 12_345],
        "warmups": 4,
        "trials": 5,
        # 8 MB of memory traffic plus two wake-ups of a process cannot take less than this.
        "min_ms": 0.1,
        "interpret": True,
        # One intra-op thread: on a small shared CPU, OpenMP oversubscription makes timings swing a hundredfold.
        "cpu_threads": 1,
        # glibc keeps freed memory instead of returning it to the system (measured on the 2-core machine: a PyTorch
        # solution's megabytes of temporaries were mapped anew, page by page, at every call; its median swung
        # 13.7-33 ms between runs, and 11.7-13.2 ms with these; benchmarks/kernel_scoring_noise.py).
        "malloc_env": {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "4294967296"},
    },
}

LOW, HIGH = -10, 10  # inputs are uniform int32 in [LOW, HIGH)


def largest_input(settings: dict) -> int:
    """Elements in the shared input buffer: the largest input of any call at this scale."""
    return max(settings["n"], *settings["check_sizes"])


def make_input(seed: int, n: int, _generator=np.random.Generator, _bits=np.random.PCG64, _int32=np.int32):
    """The input for one call as a numpy int32 array; the same seed gives the same array in every process.

    (The defaults pin the numpy classes at import time, before any of the agent's code exists.)
    """
    return _generator(_bits(seed)).integers(LOW, HIGH, size=n, dtype=_int32)


def reference(x: np.ndarray) -> np.ndarray:
    """y[i] = sum_{j<=i} x[j] * [count of positives in x[:j] is odd], accumulated in int64, returned as int32."""
    x64 = x.astype(np.int64)
    positive = (x64 > 0).astype(np.int64)
    parity = (np.cumsum(positive) - positive) & 1
    return np.cumsum(x64 * parity).astype(np.int32)


def new_seed() -> int:
    return int.from_bytes(os.urandom(8), "little") >> 1


# ---- framing: 4-byte little-endian length, a JSON header, then `nbytes` of raw payload if the header says so ----

MAX_HEADER = 1 << 20


class ChannelError(Exception):
    """The other side closed the pipe, sent garbage, or was too slow."""


def encode(header: dict) -> bytes:
    data = json.dumps(header).encode()
    return struct.pack("<I", len(data)) + data


def write_all(fd: int, data, write=os.write) -> None:
    view = memoryview(data).cast("B")
    while view:
        written = write(fd, view)
        view = view[written:]


class Reader:
    """Reads frames from a pipe with deadlines (parent side); `parse` turns a header's bytes into its value (the
    scorer's bounded JSON parser: the other side is untrusted) or raises ChannelError."""

    def __init__(self, fd: int, parse: Callable[[bytes], object]):
        self.fd = fd
        self.parse = parse

    def _wait(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError
        ready, _, _ = select.select([self.fd], [], [], remaining)
        if not ready:
            raise TimeoutError

    def read_into(self, buffer, deadline: float) -> None:
        view = memoryview(buffer).cast("B")
        while view:
            self._wait(deadline)
            got = os.readv(self.fd, [view[: 1 << 24]])
            if got == 0:
                raise ChannelError("pipe closed")
            view = view[got:]

    def read_header(self, deadline: float) -> dict:
        size_bytes = bytearray(4)
        self.read_into(size_bytes, deadline)
        (size,) = struct.unpack("<I", size_bytes)
        if size > MAX_HEADER:
            raise ChannelError("oversized message")
        data = bytearray(size)
        self.read_into(data, deadline)
        header = self.parse(bytes(data))
        if not isinstance(header, dict):
            raise ChannelError("malformed message")
        return header
