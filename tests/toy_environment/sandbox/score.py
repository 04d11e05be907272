"""Toy scoring program: raw = the number in answer.txt. 'crash' makes scoring itself fail (infrastructure);
'overflow' sets off a bug of this scorer (an OverflowError), as hostile data might in a real one."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sandbox_lib import InfrastructureError, Invalid, Scored, ScoringRun, main  # noqa: E402


def score(run: ScoringRun) -> Scored:
    path = run.snapshot() / "answer.txt"
    if not path.is_file():
        raise Invalid("answer.txt is missing")
    text = path.read_text().strip()
    if text == "crash":
        raise InfrastructureError("asked to crash")
    if text == "overflow":
        return Scored(float(10**400), "unreachable")
    try:
        raw = float(text)
    except ValueError:
        raise Invalid("answer.txt does not hold a number") from None
    return Scored(raw, "ok", {"scale": run.scale})


if __name__ == "__main__":
    sys.exit(main(score))
