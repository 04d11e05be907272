"""Scoring program of scaling_law (docs/CONTRACT.md): score WS/answer.json against the ground-truth sweep.

Runs no code of the agent and reads one file: it opens the workspace folder and then answer.json in it without
following links (a regular file, at most 64 KiB) and applies answer_rules.evaluate_answer. This one bounded read
replaces `run.snapshot()`: copying a whole workspace (which may hold large experiment files) could only add a way
for a valid answer to fail. The message the agent sees states validity and the fraction of the budget used,
never the score.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from answer_rules import GroundTruth, InvalidAnswer, evaluate_answer
from sandbox_lib import Invalid, Scored, ScoringRun, main
from scaling_common import SETTINGS

# Reading one small file needs no time of its own; the limit only satisfies the protocol's accounting.
TIMEOUTS_S = {"smoke": {"read": 5}, "full": {"read": 5}}
ANSWER = "answer.json"
MAX_ANSWER_BYTES = 64 * 1024


def read_answer(workspace: Path) -> str:
    """The answer's text; links (of the folder or the file), FIFOs and devices are invalid, never followed."""
    try:
        folder = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise InvalidAnswer("the workspace is not a plain folder") from None
    try:
        fd = os.open(ANSWER, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    except FileNotFoundError:
        raise InvalidAnswer(f"{ANSWER} not found in the workspace") from None
    except OSError:
        raise InvalidAnswer(f"{ANSWER} must be a regular file (not a link)") from None
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise InvalidAnswer(f"{ANSWER} must be a regular file")
        data = f.read(MAX_ANSWER_BYTES + 1)
    if len(data) > MAX_ANSWER_BYTES:
        raise InvalidAnswer(f"{ANSWER} is larger than {MAX_ANSWER_BYTES} bytes")
    return data.decode("utf-8", errors="replace")


def score(run: ScoringRun) -> Scored:
    truth = GroundTruth.load(HERE / f"ground_truth_{run.scale}.json")
    run.details["ground_truth"] = truth.provenance
    try:
        raw, message, details = evaluate_answer(read_answer(run.workspace), SETTINGS[run.scale], truth)
    except InvalidAnswer as invalid:
        raise Invalid(str(invalid), invalid.details) from None
    return Scored(raw=raw, message=message, details=details)


if __name__ == "__main__":
    sys.exit(main(score))
