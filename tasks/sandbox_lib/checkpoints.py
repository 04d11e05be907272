"""The one loader for checkpoints the agent submits (weights only, as the agent user, memory-capped, time-limited).

    rules = checkpoint_rules(model, label="submission/model.pt")      # from the harness's own model (torch)
    state = load_untrusted_checkpoint(run, run.workspace / "submission/model.pt", rules, timeout=run.timeout(300))

1. `weights.py` runs in its own process as `run.run_as`, so the agent's file is opened with the agent's permissions
   (a link is refused as a link; a pipe, socket or device as not a regular file), under an address-space cap and a
   timeout (a decompression bomb or a hang is an invalid submission, never an out-of-memory scorer); it writes
   the plain tensors it checked.
2. The scoring process copies that output into its private directory (bounded, never through a link) and loads it
   with the same checks again, so tampering between the steps gains nothing.
Every failure of the submission raises `Invalid` with a message for the agent.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import stat
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .program import Invalid, ScoringRun
from .untrusted import run_untrusted
from .untrusted_files import parse_json

if TYPE_CHECKING:
    import torch

# Address space the checking process needs beyond the checkpoint itself (the Python interpreter and torch).
LOADER_BASE_MEMORY = 3 * 1024**3
# The checkpoint may be held about three times at once: the file's bytes, the loaded tensors, the clean copy.
LOADER_MEMORY_FACTOR = 3
_WORKER = Path(__file__).resolve().parent / "weights.py"
_REPORT_LIMIT = 1 << 20


def checkpoint_rules(
    model: torch.nn.Module,
    *,
    label: str,
    exact_dtypes: bool = True,
    containers: tuple[str, ...] = ("model", "state_dict", "model_state_dict"),
    strip_prefixes: tuple[str, ...] = ("_orig_mod.", "module."),
    tied: tuple[tuple[str, str], ...] = (),
    fill_tied: bool = False,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The rules a submission must meet: the names and shapes (and dtypes, when `exact_dtypes`) of `model`'s state.

    `tied` pairs must hold equal tensors (`fill_tied`: a missing second is taken from the first); `config`, when
    given, must equal a checkpoint's `config` entry if it has one. A model on the meta device costs no memory."""
    return parameter_rules(
        {
            name: [list(t.shape), str(t.dtype).removeprefix("torch.") if exact_dtypes else None]
            for name, t in model.state_dict().items()
        },
        label=label,
        containers=containers,
        strip_prefixes=strip_prefixes,
        tied=tied,
        fill_tied=fill_tied,
        config=config,
    )


def parameter_rules(
    parameters: dict[str, list[Any]],
    *,
    label: str,
    containers: tuple[str, ...] = ("model", "state_dict", "model_state_dict"),
    strip_prefixes: tuple[str, ...] = ("_orig_mod.", "module."),
    tied: tuple[tuple[str, str], ...] = (),
    fill_tied: bool = False,
    config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """`checkpoint_rules` from a stored `{name: [shape, dtype or None]}` (None: any floating-point dtype)."""
    return {
        "label": label,
        "parameters": parameters,
        "containers": list(containers),
        "strip_prefixes": list(strip_prefixes),
        "tied": [list(pair) for pair in tied],
        "fill_tied": fill_tied,
        "config": config,
    }


def _read_output(path: Path, limit: int, destination: Path | None = None) -> bytes | None:
    """Read a file the agent user's process wrote: no link, regular, at most `limit` bytes; None otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        if destination is None:
            return file.read(limit + 1)[:limit]
        with open(destination, "wb") as out:
            shutil.copyfileobj(file, out)
        return b""


def load_untrusted_checkpoint(
    run: ScoringRun,
    source: Path,
    rules: dict[str, Any],
    *,
    timeout: float,
    memory_limit: int | None = None,
) -> dict[str, Any]:
    """The checked tensors of the agent's checkpoint at `source` (see the module docstring), or `Invalid`."""
    from . import weights

    path = check_untrusted_checkpoint(run, source, rules, timeout=timeout, memory_limit=memory_limit)
    return weights.read_checked_state(path, rules)


def check_untrusted_checkpoint(
    run: ScoringRun,
    source: Path,
    rules: dict[str, Any],
    *,
    timeout: float,
    memory_limit: int | None = None,
) -> Path:
    """Step 1 alone: a root-only copy of the tensors the agent user's process checked (load it with
    `weights.read_checked_state(path, rules)`, e.g. in a process of its own), or `Invalid`."""
    from . import weights

    max_bytes = weights.max_checkpoint_bytes(rules)
    rules = {**rules, "max_bytes": max_bytes}
    memory = memory_limit or LOADER_BASE_MEMORY + LOADER_MEMORY_FACTOR * max_bytes
    # A folder the agent user can enter by name only; the worker and its rules are readable, its output its own.
    folder = run.work / f"checkpoint-{secrets.token_hex(8)}"
    folder.mkdir(mode=0o755)
    shutil.copyfile(_WORKER, folder / "weights.py")
    (folder / "rules.json").write_text(json.dumps(rules))
    output = folder / "out"
    output.mkdir(mode=0o700)
    if run.run_as:
        import pwd

        account = pwd.getpwnam(run.run_as)
        os.chown(output, account.pw_uid, account.pw_gid)
    for name in ("weights.py", "rules.json"):
        os.chmod(folder / name, 0o644)
    environment = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "OMP_NUM_THREADS": "1", "CUDA_VISIBLE_DEVICES": ""}
    checked = run_untrusted(
        [sys.executable, "-I", str(folder / "weights.py"), str(source), str(folder / "rules.json"), str(output)],
        cwd=folder,
        user=run.run_as,
        timeout=timeout,
        env=environment,
        file_size_limit=max_bytes + (1 << 20),
        memory_limit=memory,
    )
    label = rules["label"]
    if checked.timed_out:
        raise Invalid(f"loading {label} took longer than {timeout:.0f}s")
    report_bytes = _read_output(output / "report.json", _REPORT_LIMIT)
    if not checked.ok or report_bytes is None:
        raise Invalid(
            f"loading {label} failed ({checked.describe()}; a checkpoint of this model fits in "
            f"{memory // 1024**2} MiB of memory)",
            details={"loader_stderr": checked.stderr_tail[-600:]},
        )
    try:
        report = parse_json(report_bytes, f"the check's report on {label}")
    except Invalid:
        report = None
    if not isinstance(report, dict) or not report.get("valid"):
        message = report.get("message") if isinstance(report, dict) else None
        raise Invalid(str(message or f"{label} is not an acceptable checkpoint")[:600])
    private = run.work / f"private-{secrets.token_hex(8)}"
    private.mkdir(mode=0o700)
    if _read_output(output / "clean.pt", max_bytes, private / "clean.pt") is None:
        raise Invalid(f"the checked copy of {label} was tampered with during scoring")
    return private / "clean.pt"


# Copies one small file as the agent user: never through a link, only a regular file, at most LIMIT bytes.
_READ_AS_AGENT = """
import os, stat, sys
source, target, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
except FileNotFoundError:
    sys.exit(3)
info = os.fstat(fd)
if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
    sys.exit(4)
with open(target, "wb") as out:
    out.write(os.read(fd, limit))
"""


def read_as_agent(run: ScoringRun, source: Path, *, max_bytes: int, timeout: float) -> bytes | None:
    """A small file of the agent's (e.g. a settings file beside a checkpoint), read with the agent's permissions;
    None when it does not exist, `Invalid` when it is a link, not a regular file, too large or unreadable."""
    folder = run.work / f"read-{secrets.token_hex(8)}"
    folder.mkdir(mode=0o700)
    if run.run_as:
        import pwd

        account = pwd.getpwnam(run.run_as)
        os.chown(folder, account.pw_uid, account.pw_gid)
    copied = run_untrusted(
        [sys.executable, "-I", "-c", _READ_AS_AGENT, str(source), str(folder / "copy"), str(max_bytes)],
        cwd=folder,
        user=run.run_as,
        timeout=timeout,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        file_size_limit=max_bytes + 1,
    )
    if copied.returncode == 3:
        return None
    content = _read_output(folder / "copy", max_bytes) if copied.ok else None
    if content is None:
        raise Invalid(
            f"{source.name} must be a regular file of at most {max_bytes} bytes, readable by the agent's user "
            "(not a link)"
        )
    return content
