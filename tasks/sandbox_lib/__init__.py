"""Sandbox-side helpers shared by every scoring and preparation program (standard library only at import).

Imported as `rebench.sandbox_lib` everywhere: in the sandbox from the staged slice of the package (modules.py), on
the host from the installed package (tests, the `rebench score` CLI).

- `main` (program.py): the scoring program's entry point; the environment supplies `score(run) -> Scored`.
- `Reason` (result.py): every verdict message, a string literal of the scorer's with numeric fields.
- `Preparation` (preparation.py): `prepare.py`'s entry point; the smoke cache and the "already prepared" guard.
- `load_untrusted_checkpoint` (checkpoints.py, needs torch when called): the agent's weights, checked.
- `run_untrusted` / `demote_to` (untrusted.py): run the agent's code as the agent user with limits.
- `ScoringRun.untrusted` (program.py): the one door for the agent's code at scoring time, over `Quarantine`
  (isolation.py): the code runs as the dedicated runner user `RUNNER_USER`, the agent's own processes frozen and
  continued afterwards, every process scoring started killed and every trace the runner left removed.
- leftovers.py: what a user's processes leave in memory (System V objects, tmpfs files), removed by the final stop;
  `offer_to_oom_killer` puts the agent's code first in the OOM killer's line.
- users.py: every process of a user frozen, continued or killed at once (`kill(-1)` as that user); users_cli.py is
  the program the host runs over it before the final score.
- `module_command` / `copy_modules` (modules.py): how a staged program runs, `python -m` from the staged tree;
  `evaluate_in_root_process` runs a scoring program's own evaluation step to its JSON outcome.
- `thread_env` (threads.py): what a child process's environment needs to run torch on the scale's threads (one at
  smoke scale).
"""

from .checkpoints import check_untrusted_checkpoint, checkpoint_rules, load_untrusted_checkpoint, parameter_rules
from .isolation import RUNNER_USER, Quarantine, reached_the_agent, runner_user
from .preparation import Preparation
from .processes import become_subreaper, descendants, kill_descendants, reap_children, wait_for_descendants
from .program import INFRASTRUCTURE_EXIT, InfrastructureError, Invalid, Scored, ScoringRun, main
from .result import Reason, ScoringArgs, parse_scoring_args, write_result
from .snapshot import SnapshotReport, SnapshotTooLarge, snapshot_tree, snapshot_workspace
from .untrusted import UntrustedRun, demote_to, run_untrusted

__all__ = [
    "INFRASTRUCTURE_EXIT",
    "InfrastructureError",
    "Invalid",
    "Preparation",
    "Quarantine",
    "RUNNER_USER",
    "Reason",
    "Scored",
    "ScoringArgs",
    "ScoringRun",
    "SnapshotReport",
    "SnapshotTooLarge",
    "UntrustedRun",
    "become_subreaper",
    "check_untrusted_checkpoint",
    "checkpoint_rules",
    "demote_to",
    "descendants",
    "kill_descendants",
    "load_untrusted_checkpoint",
    "main",
    "parameter_rules",
    "parse_scoring_args",
    "reached_the_agent",
    "reap_children",
    "run_untrusted",
    "runner_user",
    "snapshot_tree",
    "snapshot_workspace",
    "wait_for_descendants",
    "write_result",
]
