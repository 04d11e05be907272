"""How many CPU threads torch gets in the processes a scoring or preparation program starts.

At smoke scale the models are tiny and the machines small (2 cores, often shared, as in CI): with torch's default,
one intra-op thread per core, its threads spin waiting for each other while another process holds a core.
restricted_mlm's 200-step starting model on a 2-core machine (2026-12-07), the same weights bit for bit: beside a
busy process, 70 s of wall time (44 s of CPU) on two threads, 19 s (11 s) on one; alone, 10 s on two, 13 s on one.
Full scale keeps torch's default."""

from __future__ import annotations

SMOKE_THREADS = 1


def thread_env(scale: str) -> dict[str, str]:
    """What a child process's environment needs for the scale's thread count (nothing at full scale)."""
    return {"OMP_NUM_THREADS": str(SMOKE_THREADS)} if scale == "smoke" else {}
