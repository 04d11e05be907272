"""Malformed agent-made inputs for the fuzz tests (issue 21): every variant must end in a verdict.

One generator for every environment. `file_variants` are things that are not the expected regular file (links,
pipes, folders, oversize, empty, binary); `json_variants` are files that are regular but whose JSON is hostile
(deep nesting, integers too large for floats or for `int()`, non-finite numbers, wrong types), plus each field of a
valid example replaced by hostile values. A test writes each variant where the scorer reads the agent's input with
`variant.write(path)`, runs the scoring program and calls `assert_verdict` on its outcome.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# The longest message a verdict may carry back (the agent's text is never echoed at length).
MAX_MESSAGE_CHARS = 2000
DEEP = 20_000  # nesting far beyond any recursion limit, in 40 KB
HUGE_DIGITS = 5_000  # beyond Python's int-from-string limit (4300 digits)
BIG_INTEGER = 10**400  # parses, but overflows a float


@dataclass(frozen=True)
class Variant:
    name: str
    write: Callable[[Path], None]
    # In the fast tier: the faults issue 21 reproduced (a folder or a pipe for a file, deep nesting, integers too
    # large for int() or for a float); the others run with `-m fuzz`.
    core: bool = False

    def __repr__(self) -> str:  # readable pytest ids
        return self.name


def _text(text: str | bytes) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        _clear(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else text.encode())

    return write


def _clear(path: Path) -> None:
    if path.is_symlink() or path.is_file() or path.is_fifo():
        path.unlink()
    elif path.is_dir():
        subprocess.run(["rm", "-rf", str(path)], check=True)


def _folder(path: Path) -> None:
    _clear(path)
    (path / "inner").mkdir(parents=True)


def _fifo(path: Path) -> None:
    _clear(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)  # nobody ever writes: a reader that blocks on it hangs the scorer


def _link_to(target: str) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        _clear(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.symlink_to(target)

    return write


def _self_link(path: Path) -> None:
    _link_to(path.name)(path)


def _sparse(size: int) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        _clear(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            f.truncate(size)

    return write


def file_variants(oversize: int = 1 << 31) -> list[Variant]:
    """The path is not a readable regular file of reasonable size."""
    return [
        Variant("folder", _folder, core=True),
        Variant("fifo", _fifo, core=True),
        Variant("link-to-etc-shadow", _link_to("/etc/shadow")),
        Variant("link-to-dev-zero", _link_to("/dev/zero")),
        Variant("dangling-link", _link_to("/nonexistent/rebench-fuzz")),
        Variant("self-link", _self_link),
        Variant("oversize-sparse", _sparse(oversize)),
        Variant("empty", _text(b"")),
        Variant("binary", _text(bytes(range(256)) * 16)),
        Variant("invalid-utf8", _text(b'{"a": "\xff\xfe"}')),
    ]


# (name, JSON value, in the fast tier as a whole document, in the fast tier in place of a field)
HOSTILE_VALUES: list[tuple[str, Any, bool, bool]] = []


def _hostile(name: str, value: Any, document: bool = False, field: bool = False) -> None:
    HOSTILE_VALUES.append((name, value, document, field))


@dataclass(frozen=True)
class _Raw:
    """JSON text put in verbatim (what json.dumps cannot write)."""

    text: str


_hostile("deep-list", _Raw("[" * DEEP + "]" * DEEP), document=True)
_hostile("deep-object", _Raw('{"a":' * DEEP + "1" + "}" * DEEP))
_hostile("huge-integer", _Raw("9" * HUGE_DIGITS), document=True)
_hostile("big-integer", BIG_INTEGER, field=True)
_hostile("negative-big-integer", -BIG_INTEGER)
_hostile("float-overflow", _Raw("1e999"))
_hostile("nan", _Raw("NaN"))
_hostile("infinity", _Raw("-Infinity"))
_hostile("long-string", "x" * 20_000)
_hostile("lone-surrogate", _Raw('"\\ud800"'))
_hostile("null", None)
_hostile("true", True)
_hostile("list", [1, 2, 3])
_hostile("object", {"nested": {"x": 1}})
_hostile("zero", 0)
_hostile("negative", -1)
_hostile("fraction", 0.5)


def _json_text(value: Any) -> str:
    if isinstance(value, _Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))}: {_json_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_json_text(v) for v in value) + "]"
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)  # json.dumps would too, but str() is explicit about big integers
    return json.dumps(value)


def json_variants(valid: dict[str, Any] | None = None) -> list[Variant]:
    """Hostile JSON documents: as the whole document, and (given a valid example) in place of each of its fields."""
    variants = [
        Variant(f"document-{name}", _text(_json_text(value)), core=document)
        for name, value, document, _ in HOSTILE_VALUES
    ]
    variants += [
        Variant("truncated", _text('{"a": [1, 2')),
        Variant("trailing-garbage", _text("{} {}")),
        Variant("duplicate-keys", _text('{"a": 1, "a": 2}')),
    ]
    for field in valid or {}:
        for name, value, _, in_fast_tier in HOSTILE_VALUES:
            document = {**valid, field: value}
            variants.append(Variant(f"{field}-{name}", _text(_json_text(document)), core=in_fast_tier))
    return variants


def params(variants: list[Variant]) -> list[Any]:
    """pytest parameters: the core variants in the fast tier, the rest marked fuzz (`-m fuzz`)."""
    return [pytest.param(v, id=v.name, marks=() if v.core else pytest.mark.fuzz) for v in variants]


def assert_verdict(completed: subprocess.CompletedProcess, result_path: Path) -> dict:
    """The scoring program ran to a verdict: exit 0, one result object, a bounded message, no harness failure."""
    assert completed.returncode == 0, f"harness failure (exit {completed.returncode}): {completed.stderr[-2000:]}"
    result = json.loads(result_path.read_text())
    assert isinstance(result["valid"], bool)
    assert isinstance(result["message"], str) and result["message"]
    assert len(result["message"]) <= MAX_MESSAGE_CHARS, result["message"][:300]
    assert "scoring_failure" not in result["details"], result["details"]["scoring_failure"]
    return result
