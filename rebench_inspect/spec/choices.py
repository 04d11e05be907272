"""One sentence for a value that is not among the allowed ones, with the nearest allowed one as a suggestion."""

import difflib
from collections.abc import Sequence


def not_one_of(kind: str, given: object, allowed: Sequence[str]) -> str:
    """E.g. "unknown environment 'toy_contrat': did you mean toy_contract? (one of: ...)"."""
    nearest = difflib.get_close_matches(str(given), allowed, n=1)
    suggestion = f"did you mean {nearest[0]}? " if nearest else ""
    return f"unknown {kind} {given!r}: {suggestion}(one of: {', '.join(allowed)})"
