"""The scoring program's command line and result file (see docs/CONTRACT.md).

Everything the result file says is built from the scorer's own vocabulary: a `Reason` is a sentence written as a
string literal in the scoring code (a static test checks every `Reason(...)`), and its fields take only numbers the
scorer computed or other `Reason`s. `details` hold numbers, booleans, None, `Reason`s and SHA-256 digests under
identifier-like keys.
Nothing read from or printed by the agent's code (file contents, names, exception text, exit statuses) can be
written: `write_result` refuses every other type, and caps the message and the details.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Hard caps on what one result may say (the host caps again: rebench_inspect.runtime.scoring.ScoringProgramResult).
MAX_MESSAGE_CHARS = 1000
MAX_DETAILS_BYTES = 16 * 1024
MAX_DETAILS_DEPTH = 4
_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}")
# A SHA-256 digest the scorer computed (e.g. of the checked checkpoint, to re-score that very file later): the one
# string details may hold besides a Reason, since nobody can choose what a digest says.
_DIGEST = re.compile(r"[0-9a-f]{64}")
_FORMATTED = object()  # the private mark of a Reason made by `Reason.format`, not by the scoring code's literal


class Reason:
    """A sentence of the scorer's own, e.g. `TOO_SLOW = Reason("ran past the {limit_s:.0f} s limit")`.

    Declare each one with a string literal (no f-string, no variable: tests/machinery/test_verdicts.py checks the
    scoring code). `format(**values)` fills its named fields with finite numbers, booleans or other Reasons; a
    string, or anything else, is refused, so text from the agent's code cannot get into a verdict."""

    __slots__ = ("fields", "text")

    def __init__(self, template: str, _mark: object = None) -> None:
        if type(template) is not str:
            raise TypeError("a Reason is a string literal of the scoring code")
        if len(template) > MAX_MESSAGE_CHARS:
            raise ValueError(f"a Reason is at most {MAX_MESSAGE_CHARS} characters")
        self.text = template
        self.fields: frozenset[str] = frozenset() if _mark is _FORMATTED else _template_fields(template)

    def format(self, **values: Any) -> Reason:
        """This sentence with its fields filled (a Reason without fields is returned as it is)."""
        if set(values) != self.fields:
            raise TypeError(f"Reason fields {sorted(self.fields)} given {sorted(values)}")
        if not values:
            return self
        text = self.text.format(**{name: _field_value(name, value) for name, value in values.items()})
        return Reason(text[:MAX_MESSAGE_CHARS], _FORMATTED)

    def fill(self, numbers: dict[str, Any]) -> Reason:
        """This sentence with the fields it has taken from `numbers` (for a table of Reasons sharing numbers)."""
        return self.format(**{name: numbers[name] for name in self.fields})

    def __str__(self) -> str:
        if self.fields:
            raise TypeError(f"Reason fields {sorted(self.fields)} were not filled")
        return self.text

    def __repr__(self) -> str:
        return f"Reason({self.text!r})"


class ReasonError(Exception):
    """A refusal that a caller turns into its own verdict, carrying the scorer's `Reason` (already filled)."""

    def __init__(self, reason: Reason) -> None:
        super().__init__(str(reason))
        self.reason = reason


def _template_fields(template: str) -> frozenset[str]:
    fields = set()
    for _, name, spec, conversion in string.Formatter().parse(template):
        if name is None:
            continue
        if not name.isidentifier() or conversion is not None or (spec and "{" in spec):
            raise ValueError(f"Reason fields are plain names with a plain format spec: {template!r}")
        fields.add(name)
    return frozenset(fields)


def _field_value(name: str, value: Any) -> Any:
    if isinstance(value, Reason):
        return str(value)
    if isinstance(value, bool) or (isinstance(value, (int, float)) and math.isfinite(value)):
        return value
    raise TypeError(f"Reason field {name!r} takes a finite number, a bool or a Reason, not {type(value).__name__}")


def checked_details(details: dict[str, Any]) -> dict[str, Any]:
    """`details` as JSON data, or TypeError: identifier-like keys (letters, digits, `_.-`); numbers (non-finite ones
    become None), booleans, None, Reasons (as their text) and SHA-256 hex digests, in lists and dicts at most
    MAX_DETAILS_DEPTH deep."""

    def plain(value: Any, depth: int) -> Any:
        if depth > MAX_DETAILS_DEPTH:
            raise TypeError(f"details nest deeper than {MAX_DETAILS_DEPTH}")
        if value is None or isinstance(value, bool):
            return value
        if isinstance(value, (int, float)):
            return value if math.isfinite(value) else None
        if isinstance(value, Reason):
            return str(value)
        if type(value) is str and _DIGEST.fullmatch(value):
            return value
        if isinstance(value, (list, tuple)):
            return [plain(item, depth + 1) for item in value]
        if isinstance(value, dict):
            for key in value:
                if type(key) is not str or not _KEY.fullmatch(key):
                    raise TypeError("a details key is an identifier the scorer chose")
            return {key: plain(item, depth + 1) for key, item in value.items()}
        raise TypeError(f"details hold numbers, booleans, None, Reasons and digests, not {type(value).__name__}")

    return plain(dict(details), 0)


@dataclass(frozen=True)
class ScoringArgs:
    workspace: Path
    protected: Path
    scale: str
    result: Path
    run_as: str | None
    # Glob patterns (EnvironmentSpec.workspace_ignore) that a workspace snapshot leaves out.
    ignore: tuple[str, ...] = ()
    # The host's limit for this run (EnvironmentSpec.scoring_timeout_s); inner steps must finish within it.
    time_limit_s: float | None = None
    # Users the agent can also start processes as (EnvironmentSpec.agent_extra_users): their processes are its too.
    agent_extra_users: tuple[str, ...] = ()
    # Root-only temporary space outside the folders the agent can fill (SandboxLayout.scoring_scratch); None: the
    # system's.
    scratch: Path | None = None


def parse_scoring_args(argv: list[str] | None = None) -> ScoringArgs:
    parser = argparse.ArgumentParser(description="rebench scoring program")
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--protected", type=Path, required=True)
    parser.add_argument("--scale", choices=["smoke", "full"], required=True)
    parser.add_argument("--result", type=Path, required=True)
    parser.add_argument("--run-as", default=None, help="unprivileged user for the agent's code")
    parser.add_argument("--ignore", action="append", default=[], help="glob of workspace files never scored")
    parser.add_argument("--time-limit", type=float, default=None, help="seconds the host allows this run")
    parser.add_argument(
        "--agent-extra-user", action="append", default=[], help="another user the agent can start processes as"
    )
    parser.add_argument("--scratch", type=Path, default=None, help="root-only folder for temporary files")
    ns = parser.parse_args(argv)
    return ScoringArgs(
        ns.workspace,
        ns.protected,
        ns.scale,
        ns.result,
        ns.run_as or None,
        tuple(ns.ignore),
        ns.time_limit,
        tuple(ns.agent_extra_user),
        ns.scratch,
    )


NON_FINITE_SCORE = Reason("the score is not a finite number")
DETAILS_OVER_LIMIT = Reason("details over the size limit were left out")


def write_result(
    path: Path,
    *,
    valid: bool,
    raw: float | None,
    message: Reason,
    details: dict[str, Any] | None = None,
) -> None:
    """Write the one JSON object the host reads; TypeError for a message that is not a filled Reason or details
    that are not plain data (a scorer bug: the sample errors, nothing is written). A non-finite raw value is
    never valid; details over MAX_DETAILS_BYTES are replaced by a note."""
    if not isinstance(message, Reason):
        raise TypeError(f"a result message is a Reason, not {type(message).__name__}")
    text = str(message)
    plain_details = checked_details(details or {})
    if raw is not None and not math.isfinite(raw):
        valid, text = False, str(NON_FINITE_SCORE)
    encoded = json.dumps(plain_details, allow_nan=False)
    if len(encoded.encode()) > MAX_DETAILS_BYTES:
        plain_details = {"details_left_out": str(DETAILS_OVER_LIMIT)}
    result = {
        "valid": bool(valid),
        "raw": float(raw) if raw is not None and valid else None,
        "message": text[:MAX_MESSAGE_CHARS],
        "details": plain_details,
    }
    Path(path).write_text(json.dumps(result, allow_nan=False))
