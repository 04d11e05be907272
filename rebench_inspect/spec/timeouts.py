"""Named time limits of the host side, in seconds (one place; `tests/contract/test_environments.py` checks that each
environment's inner limits fit inside them).

Nesting, outermost first: Inspect's sample `time_limit` (working budget × TIME_LIMIT_FACTOR, runtime.task)
⊃ one scoring run: `ResolvedEnvironment.scoring_timeout_s` + SCORING_TIMEOUT_MARGIN_S for the sandbox `exec`
⊃ the scoring program's own steps (each environment's `TIMEOUTS_S` in scoring/score.py; `ScoringRun.timeout()`
also cuts every step to what is left of `scoring_timeout_s`, which the host passes as `--time-limit`).
"""

# A harness command in the sandbox (mkdir, chmod, chown): generous, these take milliseconds.
HARNESS_COMMAND_TIMEOUT_S = 120
# Time the sandbox may take beyond the scoring program's own budget (process start, imports, staging).
SCORING_TIMEOUT_MARGIN_S = 120
# Copying the agent's workspace into the scoring service (runtime.scoring.copy_submission): one deadline over packing,
# moving the parts and unpacking. Packing stops itself at SUBMISSION_PACK_TIMEOUT_S (past it the entry is invalid);
# the copy's bounds on bytes and entries keep moving and unpacking what is left well inside the rest.
SUBMISSION_PACK_TIMEOUT_S = 120
SUBMISSION_COPY_TIMEOUT_S = 360
