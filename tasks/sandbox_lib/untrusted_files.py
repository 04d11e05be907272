"""Bounded readers for files that untrusted code wrote (standard library only): every failure is a verdict.

Scoring programs run as root and read what the agent (or the agent's code, in a process of its own) wrote: answers,
settings, reports, results, headers. Such a file may be a link, a pipe that blocks forever, a folder, a sparse file
of terabytes, or JSON built to crash the parser (nesting deeper than the recursion limit, integers of thousands of
digits or too large for a float, NaN). Every read of such a file goes through this module:

    ANSWER = Reason("answer.json")                                         # the scorer's name for the file
    text = read_regular(path, ANSWER, max_bytes=64 * 1024)                 # bytes of a regular file, never a link
    answer = read_json(path, ANSWER, max_bytes=64 * 1024)                  # the same, parsed with bounds

Failures raise `Invalid` with one of this module's fixed reasons, whose `{label}` is the scorer's own `Reason` naming
the file (e.g. `Reason("answer.json")`), never the file's name or content, so the message is short and safe to show.
A harness failure is never raised here: the file's flaws are the submission's.
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
from .result import Reason, ReasonError

# Deep enough for every format the scorers read (the deepest, restricted_mlm's operator arguments, nest a few levels).
MAX_JSON_DEPTH = 64
# int64 has 19 digits; nothing a scorer reads needs more, and a float holds every integer of this size.
MAX_INTEGER_DIGITS = 20
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY

NOT_FOUND = Reason("{label} not found")
UNREADABLE = Reason("{label} cannot be read")
A_LINK = Reason("{label} is a symbolic link (links are not followed)")
UNOPENABLE = Reason("{label} cannot be opened")
A_FOLDER = Reason("{label} is a folder, not a file")
NOT_REGULAR = Reason("{label} is a pipe, socket or device, not a regular file")
TOO_LARGE = Reason("{label} is larger than {max_bytes} bytes")
NOT_UTF8 = Reason("{label} is not UTF-8 text")
LONG_INTEGER = Reason("{label} holds an integer of more than {max_digits} digits")
HUGE_NUMBER = Reason("{label} holds a number too large for a float")
NON_FINITE = Reason("{label} holds NaN or Infinity, which are not JSON numbers")
TOO_DEEP = Reason("{label} nests arrays or objects deeper than {max_depth} levels")
NOT_JSON = Reason("{label} is not valid JSON")


class _Refused(ReasonError):
    """A JSON value the bounds refuse (raised inside the parser's hooks, turned into `Invalid` by `parse_json`)."""


def open_regular(path: Path, label: Reason, *, folder_fd: int | None = None) -> int:
    """A read-only descriptor of the regular file at `path` (relative to `folder_fd` when given), never through a
    link (the last component), never a folder, pipe, socket or device; the caller closes it."""
    try:
        fd = os.open(path, _OPEN_FLAGS, dir_fd=folder_fd)
    except FileNotFoundError:
        raise Invalid(NOT_FOUND, label=label) from None
    except PermissionError:
        raise Invalid(UNREADABLE, label=label) from None
    except OSError as ex:
        if ex.errno == errno.ELOOP:
            raise Invalid(A_LINK, label=label) from None
        raise Invalid(UNOPENABLE, label=label) from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise Invalid(A_FOLDER, label=label)
        raise Invalid(NOT_REGULAR, label=label)
    os.set_blocking(fd, True)
    return fd


def read_regular(path: Path, label: Reason, *, max_bytes: int, folder_fd: int | None = None) -> bytes:
    """The bytes of the regular file at `path` (see `open_regular`), at most `max_bytes` of them."""
    fd = open_regular(path, label, folder_fd=folder_fd)
    with os.fdopen(fd, "rb") as file:
        if os.fstat(fd).st_size > max_bytes:
            raise Invalid(TOO_LARGE, label=label, max_bytes=max_bytes)
        data = file.read(max_bytes + 1)  # the file may grow while it is read
    if len(data) > max_bytes:
        raise Invalid(TOO_LARGE, label=label, max_bytes=max_bytes)
    return data


def parse_json(
    data: bytes | str,
    label: Reason,
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
            raise Invalid(NOT_UTF8, label=label) from None

    def integer(text: str) -> int:
        if len(text.lstrip("-")) > max_integer_digits:
            raise _Refused(LONG_INTEGER.format(label=label, max_digits=max_integer_digits))
        return int(text)

    def number(text: str) -> float:
        value = float(text)
        if not math.isfinite(value) and not allow_non_finite:
            raise _Refused(HUGE_NUMBER.format(label=label))
        return value

    def constant(text: str) -> float:
        if not allow_non_finite:
            raise _Refused(NON_FINITE.format(label=label))
        return float(text)

    try:
        value = json.loads(data, parse_int=integer, parse_float=number, parse_constant=constant)
    except _Refused as ex:
        raise Invalid(ex.reason) from None
    except RecursionError:
        raise Invalid(TOO_DEEP, label=label, max_depth=max_depth) from None
    except ValueError:
        raise Invalid(NOT_JSON, label=label) from None
    if _depth(value) > max_depth:
        raise Invalid(TOO_DEEP, label=label, max_depth=max_depth)
    return value


def read_json(
    path: Path,
    label: Reason,
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
