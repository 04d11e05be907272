"""The scoring program's command line and result file (see docs/CONTRACT.md)."""

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
    )


def write_result(
    path: Path,
    *,
    valid: bool,
    raw: float | None,
    message: str,
    details: dict[str, Any] | None = None,
) -> None:
    """Write the one JSON object the host reads. A non-finite raw value is never valid."""
    if raw is not None and not math.isfinite(raw):
        valid, message = False, f"non-finite score ({message})"
    result = {
        "valid": bool(valid),
        "raw": float(raw) if raw is not None and valid else None,
        "message": message,
        "details": details or {},
    }
    Path(path).write_text(json.dumps(result, default=str))
