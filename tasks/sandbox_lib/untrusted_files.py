"""Bounded readers for files that untrusted code wrote (standard library only): every failure is a verdict.

Scoring programs run as root and read what the agent (or the agent's code, in a process of its own) wrote: answers,
settings, reports, results, headers. Such a file may be a link, a pipe that blocks forever, a folder, a sparse file
of terabytes, or JSON built to crash the parser (nesting deeper than the recursion limit, integers of thousands of
digits or too large for a float, NaN). Every read of such a file goes through this module:

    text = read_regular(path, "answer.json", max_bytes=64 * 1024)          # bytes of a regular file, never a link
    answer = read_json(path, "answer.json", max_bytes=64 * 1024)           # the same, parsed with bounds

Failures raise `Invalid` with a fixed reason that names the scorer's `label` for the file, never the file's content,
so the message is short and safe to show. A harness failure is never raised here: the file's flaws are the
submission's.
"""

from __future__ import annotations

import errno
import json
import math
import os
import stat
from pathlib import Path
from typing import Any

from .program import Invalid

# Deep enough for every format the scorers read (the deepest, restricted_mlm's operator arguments, nest a few levels).
MAX_JSON_DEPTH = 64
# int64 has 19 digits; nothing a scorer reads needs more, and a float holds every integer of this size.
MAX_INTEGER_DIGITS = 20
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY


class _Refused(Exception):
    """A JSON value the bounds refuse (raised inside the parser's hooks, turned into `Invalid` by `parse_json`)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def open_regular(path: Path, label: str, *, folder_fd: int | None = None) -> int:
    """A read-only descriptor of the regular file at `path` (relative to `folder_fd` when given), never through a
    link (the last component), never a folder, pipe, socket or device; the caller closes it."""
    try:
        fd = os.open(path, _OPEN_FLAGS, dir_fd=folder_fd)
    except FileNotFoundError:
        raise Invalid(f"{label} not found") from None
    except PermissionError:
        raise Invalid(f"{label} cannot be read") from None
    except OSError as ex:
        if ex.errno == errno.ELOOP:
            raise Invalid(f"{label} is a symbolic link (links are not followed)") from None
        raise Invalid(f"{label} cannot be opened") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise Invalid(f"{label} is a folder, not a file")
        raise Invalid(f"{label} is a pipe, socket or device, not a regular file")
    os.set_blocking(fd, True)
    return fd


def read_regular(path: Path, label: str, *, max_bytes: int, folder_fd: int | None = None) -> bytes:
    """The bytes of the regular file at `path` (see `open_regular`), at most `max_bytes` of them."""
    fd = open_regular(path, label, folder_fd=folder_fd)
    with os.fdopen(fd, "rb") as file:
        if os.fstat(fd).st_size > max_bytes:
            raise Invalid(f"{label} is larger than {max_bytes} bytes")
        data = file.read(max_bytes + 1)  # the file may grow while it is read
    if len(data) > max_bytes:
        raise Invalid(f"{label} is larger than {max_bytes} bytes")
    return data


def parse_json(
    data: bytes | str,
    label: str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_integer_digits: int = MAX_INTEGER_DIGITS,
    allow_non_finite: bool = False,
) -> Any:
    """The JSON value of `data` (UTF-8), bounded: at most `max_depth` nested arrays/objects, integers of at most
    `max_integer_digits` digits, only finite numbers (no NaN, Infinity or 1e999) unless `allow_non_finite` (for
    formats that carry them, such as a graph's constants)."""
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError:
            raise Invalid(f"{label} is not UTF-8 text") from None

    def integer(text: str) -> int:
        if len(text.lstrip("-")) > max_integer_digits:
            raise _Refused(f"{label} holds an integer of more than {max_integer_digits} digits")
        return int(text)

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value) and not allow_non_finite:
            raise _Refused(f"{label} holds a number too large for a float")
        return value

    def constant(text: str) -> float:
        if not allow_non_finite:
            raise _Refused(f"{label} holds NaN or Infinity, which are not JSON numbers")
        return float(text)

    try:
        value = json.loads(data, parse_int=integer, parse_float=number, parse_constant=constant)
    except _Refused as ex:
        raise Invalid(ex.reason) from None
    except RecursionError:
        raise Invalid(f"{label} nests arrays or objects deeper than {max_depth} levels") from None
    except ValueError:
        raise Invalid(f"{label} is not valid JSON") from None
    if _depth(value) > max_depth:
        raise Invalid(f"{label} nests arrays or objects deeper than {max_depth} levels")
    return value


def read_json(
    path: Path,
    label: str,
    *,
    max_bytes: int,
    max_depth: int = MAX_JSON_DEPTH,
    max_integer_digits: int = MAX_INTEGER_DIGITS,
    allow_non_finite: bool = False,
    folder_fd: int | None = None,
) -> Any:
    """`parse_json` of `read_regular(path)`."""
    data = read_regular(path, label, max_bytes=max_bytes, folder_fd=folder_fd)
    return parse_json(
        data, label, max_depth=max_depth, max_integer_digits=max_integer_digits, allow_non_finite=allow_non_finite
    )


def _depth(value: Any) -> int:
    """Nesting depth of a parsed JSON value (a scalar is 0), without recursion."""
    deepest, pending = 0, [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            item = list(item.values())
        elif not isinstance(item, list):
            continue
        deepest = max(deepest, depth + 1)
        pending.extend((child, depth + 1) for child in item if isinstance(child, (dict, list)))
    return deepest
