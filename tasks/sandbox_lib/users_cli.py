"""The host's command over users.py, run as root from the staged tree (rebench_inspect.runtime.scoring):

    python3 -m rebench.sandbox_lib.users_cli stop USER [USER ...]

prints `{"users": [...], "survivors": [...], "reclaimed": {...}}`: every process of those users frozen, then killed,
again until /proc shows none; then what they left in memory is removed (leftovers.py: System V objects, files in the
tmpfs folders), so that it cannot starve the root commands that follow. A survivor can only be a process caught
inside the kernel (state D) with SIGKILL pending: it never runs the user's code again. The host records the survivors
with the final score instead of failing the sample, so no process can make the sample fail by not dying. Around a
scoring run in another service, `freeze USER ...` (prints `{"frozen": {uid: [pids]}}`) and
`resume --frozen '<what freeze printed>'` (continues exactly those).

A module of its own, not users.py's `__main__`: the package imports users.py, and `-m` would run a second copy.
"""

import argparse
import json
import sys

from .leftovers import reclaim
from .users import STOP_DEADLINE_S, freeze, kill_everything, resume, uids_of


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="freeze, continue or stop every process of the given users (as root)")
    parser.add_argument("action", choices=["stop", "freeze", "resume"])
    parser.add_argument("users", nargs="*")
    parser.add_argument("--deadline", type=float, default=STOP_DEADLINE_S, help="seconds before survivors are listed")
    parser.add_argument("--frozen", default="{}", help="resume: what `freeze` printed")
    args = parser.parse_args(argv)
    if args.action == "resume":
        resume({int(uid): pids for uid, pids in json.loads(args.frozen)["frozen"].items()})
        return 0
    uids = uids_of(args.users)
    if args.action == "freeze":
        print(json.dumps({"frozen": freeze(uids)}))
        return 0
    survivors = kill_everything(uids, args.deadline) if uids else []
    reclaimed = reclaim(uids) if uids else {}
    print(
        json.dumps(
            {"users": [user for user in args.users if uids_of([user])], "survivors": survivors, "reclaimed": reclaimed}
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
