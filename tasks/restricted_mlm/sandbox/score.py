"""Scoring program of restricted_mlm (docs/CONTRACT.md; run through `sandbox_lib.main`; THREAT_MODEL.md beside it).

raw = masked-LM cross-entropy (nats) of WS/solution/model.py on held-out tokens; lower is better (the host
applies ln(raw - 1.5)). The agent's code runs in a snapshot of the workspace (`run.snapshot()`: the spec's ignore
list, which holds the training tokens, left out). Two processes:
1. export_model.py, as USER (the agent's permissions), imports the agent's model.py, calls get_trained_model()
   and writes the forward pass as an operator graph (program.json) plus its constant tensors (weights.pt).
2. evaluate_program.py, as root, with no agent code imported: checks every operator of the graph against the
   allow-list (fail closed), runs the graph itself on the held-out batches and computes the loss.
The files pass from 1 to 2 through a copy made after every process of step 1 is dead.
"""

from __future__ import annotations

import json
import os
import pwd
import secrets
import shutil
import stat
import sys
import tempfile
import time
from pathlib import Path

from rebench.sandbox_lib import (
    InfrastructureError,
    Invalid,
    Reason,
    Scored,
    ScoringRun,
    main,
    run_untrusted,
)
from rebench.sandbox_lib.modules import EVALUATION_FAILED, copy_modules, evaluate_in_root_process, module_command
from rebench.sandbox_lib.threads import thread_env
from rebench.sandbox_lib.untrusted_files import read_json

SOLUTION = "solution"
# Seconds for each step, per scale; together within the host's scoring_timeout_s (task.py; checked by a test). The
# full evaluation (2000 batches of 8 x 128 tokens) takes well under a minute for the reference on one H100.
TIMEOUTS_S = {"smoke": {"export": 180, "evaluate": 240}, "full": {"export": 300, "evaluate": 600}}
FILE_LIMITS = {
    "program.json": 64 * 1024**2,
    "weights.pt": 32 * 1024**3,
    "report.json": 1024**2,
}

# What the agent is told: the scorer's sentences only. The export runs the agent's code, and the evaluation runs the
# agent's graph on held-out tokens, so neither one's text, exit status or output is quoted; check_model.py in the
# workspace runs the same checks on training data and says what is wrong in detail.
EXPORT_FAILED = Reason(
    "exporting the model failed (run check_model.py in the workspace to see why; its output is not shown here)"
)
EXPORT_REPORT = Reason("the export step's report")
EXPORT_UNREADABLE = Reason("the export step's report is unreadable")
EXPORT_MISSING = Reason("the export step wrote no program.json and weights.pt (both regular files)")
EXPORT_REACHED_THE_AGENT = Reason(
    "the export step wrote into files or sockets outside its own folders that the agent can read"
)
EVALUATION_REFUSALS = {
    "graph": Reason(
        "the exported graph is malformed or uses operations that are not allowed (check_model.py in the workspace "
        "says which)"
    ),
    "bad_logits": Reason(
        "the forward pass did not return floating-point logits of shape (batch, sequence length, vocabulary size)"
    ),
    "non_finite_loss": Reason("the loss is NaN or infinite on a held-out batch"),
    "run": Reason("running the exported forward pass on a held-out batch failed"),
    "out_of_memory": Reason("running the model ran out of memory"),
}
EVALUATED = Reason("the forward pass uses only allowed operations; evaluated on the held-out tokens")
SETTINGS_UNREADABLE = Reason("the prepared evaluation settings (meta.json) are unreadable")


def minimal_env(home: str, scale: str) -> dict[str, str]:
    keep = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8"}
    return {**env, **{key: os.environ[key] for key in keep if os.environ.get(key)}, **thread_env(scale)}


def copy_out(source: Path, destination: Path, expected_uid: int | None) -> bool:
    """Copy a file the agent's process wrote: regular, one link, not a symlink, owned by the agent, bounded size."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    info = os.fstat(fd)  # before fdopen, which refuses a folder with an exception (the fuzz tier found it)
    if (
        not stat.S_ISREG(info.st_mode)
        or info.st_nlink != 1
        or info.st_size > FILE_LIMITS[source.name]
        or (expected_uid is not None and info.st_uid != expected_uid)
    ):
        os.close(fd)
        return False
    with os.fdopen(fd, "rb") as f, open(destination, "wb") as out:
        shutil.copyfileobj(f, out)
    return True


def export(run: ScoringRun, settings: dict) -> Path:
    """Step 1: the graph and its tensors, copied into a root-only folder (returned); `Invalid` when they are not."""
    # Through the library's door for the agent's code: as the runner user where the image has one, everything it
    # started dead when the door closes (daemons die before the exporter's files are read).
    with run.untrusted(EXPORT_REACHED_THE_AGENT) as user:
        snapshot = run.snapshot(max_bytes=FILE_LIMITS["weights.pt"], owner=user)
        account = pwd.getpwnam(user) if user else None
        out = run.work / f"export-{secrets.token_hex(8)}"
        out.mkdir(mode=0o700)
        if account is not None:
            os.chown(out, account.pw_uid, account.pw_gid)
        # The exporter, root's and readable by the agent's user (the work folder is root's), run from its copy; it
        # moves into the solution folder itself.
        exporter = f"{__package__}.export_model"
        copy_modules([exporter], run.work / "exporter")
        solution = snapshot / SOLUTION
        started = time.time()
        arguments = [str(solution), str(out), str(settings["batch_size"])]
        arguments += [str(settings["sequence_length"]), str(settings["vocab_size"])]
        command, cwd = module_command(exporter, arguments, code_dir=run.work / "exporter", isolated=True)
        run_untrusted(
            command,
            cwd=cwd,
            user=user,
            timeout=run.timeout(TIMEOUTS_S[run.scale]["export"]),
            env=minimal_env(account.pw_dir if account else os.environ.get("HOME", "/tmp"), run.scale),
            file_size_limit=FILE_LIMITS["weights.pt"],
        )
    run.details["export_seconds"] = round(time.time() - started, 2)
    program = run.work / "program"
    program.mkdir(mode=0o700)
    uid = account.pw_uid if account else None
    if not copy_out(out / "report.json", program / "report.json", uid):
        raise Invalid(EXPORT_FAILED)
    report = read_json(program / "report.json", EXPORT_REPORT, max_bytes=FILE_LIMITS["report.json"])
    if not isinstance(report, dict) or "ok" not in report:
        raise Invalid(EXPORT_UNREADABLE)
    ok = report["ok"] is True
    if not ok:
        raise Invalid(EXPORT_FAILED)
    for name in ("program.json", "weights.pt"):
        if not copy_out(out / name, program / name, uid):
            raise Invalid(EXPORT_MISSING)
    return program


def evaluate(run: ScoringRun, program: Path) -> float:
    """Step 2, as root in its own process: the loss, or `Invalid`."""
    result_path = run.work / "evaluation.json"
    outcome = evaluate_in_root_process(
        f"{__package__}.evaluate_program",
        [str(program), str(run.protected), str(result_path)],
        result_path,
        timeout=run.timeout(TIMEOUTS_S[run.scale]["evaluate"]),
        # this child runs as root: it keeps the scoring program's root-only TMPDIR (sandbox_lib.program.use_scratch)
        env={**minimal_env(os.environ.get("HOME", "/root"), run.scale), "TMPDIR": tempfile.gettempdir()},
        refusal=lambda code: EVALUATION_REFUSALS.get(code, EVALUATION_FAILED),
    )
    run.details.update({key: outcome[key] for key in ("on_gpu", "ops_seen", "eval_seconds", "loss")})
    return float(outcome["loss"])


def score(run: ScoringRun) -> Scored:
    try:
        meta = json.loads((run.protected / "meta.json").read_text())
    except (OSError, ValueError):
        raise InfrastructureError(SETTINGS_UNREADABLE) from None
    loss = evaluate(run, export(run, meta["eval"]))
    return Scored(loss, EVALUATED)


# Full-scale scoring refuses to start with fewer visible (sandbox_lib.main): the evaluation runs on one GPU.
GPUS_AT_FULL_SCALE = 1

if __name__ == "__main__":
    sys.exit(main(score, gpus_at_full_scale=GPUS_AT_FULL_SCALE))
