"""Where rebench keeps what it builds on this machine, written once (standard library only: staged preparation code
and the host both import it).

`$REBENCH_CACHE_DIR`, or `~/.cache/rebench` when the variable is unset or empty: prepared smoke assets
(`<name>/smoke-<key>`, root-only: they hold held-out data), generated k8s values, tests' cached references.
"""

import os
from pathlib import Path

CACHE_VARIABLE = "REBENCH_CACHE_DIR"


def cache_root() -> Path:
    return Path(os.environ.get(CACHE_VARIABLE) or Path.home() / ".cache" / "rebench")
