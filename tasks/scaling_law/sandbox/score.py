"""Scoring program of scaling_law (docs/CONTRACT.md): score WS/answer.json against the ground-truth sweep.

Runs no code of the agent and reads one file: it opens the workspace folder and then answer.json in it without
following links (a regular file, at most 64 KiB, JSON parsed with `sandbox_lib.untrusted_files`' bounds) and
applies answer_rules.evaluate_answer. This one bounded read
replaces `run.snapshot()`: copying a whole workspace (which may hold large experiment files) could only add a way
for a valid answer to fail. The message the agent sees states validity and the fraction of the budget used,
never the score.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from answer_rules import GroundTruth, InvalidAnswer, evaluate_answer
from sandbox_lib import Invalid, Scored, ScoringRun, main
from sandbox_lib.untrusted_files import read_json
from scaling_common import SETTINGS

# Reading one small file needs no time of its own; the limit only satisfies the protocol's accounting.
TIMEOUTS_S = {"smoke": {"read": 5}, "full": {"read": 5}}
ANSWER = "answer.json"
MAX_ANSWER_BYTES = 64 * 1024


def read_answer(workspace: Path) -> object:
    """The answer's JSON value, read by the bounded reader; links (of the folder or the file), FIFOs, folders and
    hostile JSON are invalid, never followed or parsed unbounded."""
    try:
        folder = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        raise Invalid("the workspace is not a plain folder") from None
    try:
        return read_json(Path(ANSWER), ANSWER, max_bytes=MAX_ANSWER_BYTES, folder_fd=folder)
    finally:
        os.close(folder)


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
