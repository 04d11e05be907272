"""Scoring program of restricted_mlm (docs/CONTRACT.md; run through `sandbox_lib.main`; THREAT_MODEL.md beside it).

raw = masked-LM cross-entropy (nats) of WS/solution/model.py on held-out tokens; lower is better (the host
applies ln(raw - 1.5)). The agent's code runs in a snapshot of the workspace (`run.snapshot()`: the spec's ignore
list and the training tokens left out). Two processes:
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
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from sandbox_lib import InfrastructureError, Invalid, Scored, ScoringRun, kill_descendants, main, run_untrusted
from sandbox_lib.untrusted_files import read_json

SOLUTION = "solution"
# Seconds for each step, per scale; together within the host's scoring_timeout_s (task.py; checked by a test). The
# full evaluation (2000 batches of 8 x 128 tokens) takes well under a minute for the reference on one H100.
TIMEOUTS_S = {"smoke": {"export": 180, "evaluate": 240}, "full": {"export": 300, "evaluate": 600}}
FILE_LIMITS = {
    "program.json": 64 * 1024**2,
    "weights.pt": 32 * 1024**3,
    "report.json": 1024**2,
}
# The training tokens (about 18 GB at full scale) are never read by a forward pass: left out of the snapshot, which
# may otherwise hold models as large as the export may write.
SNAPSHOT_IGNORE = ("data/train.bin",)


def minimal_env(home: str) -> dict[str, str]:
    keep = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH", "OMP_NUM_THREADS")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "LANG": "C.UTF-8"}
    return {**env, **{key: os.environ[key] for key in keep if os.environ.get(key)}}


def copy_out(source: Path, destination: Path, expected_uid: int | None) -> bool:
    """Copy a file the agent's process wrote: regular, one link, not a symlink, owned by the agent, bounded size."""
    try:
        fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1 or info.st_size > FILE_LIMITS[source.name]:
            return False
        if expected_uid is not None and info.st_uid != expected_uid:
            return False
        with open(destination, "wb") as out:
            shutil.copyfileobj(f, out)
    return True


def export(run: ScoringRun, settings: dict) -> Path:
    """Step 1: the graph and its tensors, copied into a root-only folder (returned); `Invalid` when they are not."""
    snapshot = run.snapshot(max_bytes=FILE_LIMITS["weights.pt"], ignore=(*run.args.ignore, *SNAPSHOT_IGNORE))
    account = pwd.getpwnam(run.run_as) if run.run_as else None
    out = run.work / f"export-{secrets.token_hex(8)}"
    out.mkdir(mode=0o700)
    if account is not None:
        os.chown(out, account.pw_uid, account.pw_gid)
    shutil.copyfile(HERE / "export_model.py", run.work / "export_model.py")
    os.chmod(run.work / "export_model.py", 0o644)  # the agent's user reads it; the work folder is root's
    solution = snapshot / SOLUTION
    started = time.time()
    exported = run_untrusted(
        [
            sys.executable,
            "-I",
            str(run.work / "export_model.py"),
            str(solution),
            str(out),
            str(settings["batch_size"]),
            str(settings["sequence_length"]),
            str(settings["vocab_size"]),
        ],
        cwd=solution if solution.is_dir() else run.work,
        user=run.run_as,
        timeout=run.timeout(TIMEOUTS_S[run.scale]["export"]),
        env=minimal_env(account.pw_dir if account else os.environ.get("HOME", "/tmp")),
        file_size_limit=FILE_LIMITS["weights.pt"],
    )
    kill_descendants()  # anything the agent's code left behind (daemons) dies before its files are read
    run.details["export_seconds"] = round(time.time() - started, 2)
    program = run.work / "program"
    program.mkdir(mode=0o700)
    uid = account.pw_uid if account else None
    if not copy_out(out / "report.json", program / "report.json", uid):
        reason = exported.describe()
        if exported.returncode is not None and exported.returncode < 0:
            reason += " (out of memory?)"
        run.details["stderr"] = exported.stderr_tail[-600:].strip()
        raise Invalid(f"exporting the model failed: {reason}")
    report = read_json(program / "report.json", "the export step's report", max_bytes=FILE_LIMITS["report.json"])
    try:
        ok, message = bool(report["ok"]), str(report["message"])[:2000]
    except (KeyError, TypeError):
        raise Invalid("the export step's report is unreadable") from None
    if not ok:
        raise Invalid(message)
    for name in ("program.json", "weights.pt"):
        if not copy_out(out / name, program / name, uid):
            raise Invalid(f"the exported {name} is missing or not a regular file")
    return program


def evaluate(run: ScoringRun, program: Path) -> float:
    """Step 2, as root in its own process: the loss, or `Invalid`."""
    result_path = run.work / "evaluation.json"
    command = [sys.executable, "-I", str(HERE / "evaluate_program.py"), str(program), str(run.protected)]
    timeout = run.timeout(TIMEOUTS_S[run.scale]["evaluate"])
    try:
        evaluation = subprocess.run(
            [*command, str(result_path)],
            check=False,
            cwd=run.work,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=minimal_env(os.environ.get("HOME", "/root")),
        )
    except subprocess.TimeoutExpired:
        raise Invalid(f"evaluating the model timed out after {timeout:.0f} s") from None
    if evaluation.returncode != 0 or not result_path.is_file():
        reason = f"status {evaluation.returncode}" + (" (killed; out of memory?)" if evaluation.returncode < 0 else "")
        run.details["stderr"] = evaluation.stderr[-600:].strip()
        raise Invalid(f"evaluating the model failed ({reason})")
    outcome = json.loads(result_path.read_text())
    run.details["ops_seen"] = outcome.get("ops_seen")
    if not outcome.get("ok"):
        # The evaluation's message may quote names from the agent's files: cut short.
        raise Invalid(str(outcome.get("message"))[:1000])
    run.details.update(device=outcome["device"], eval_seconds=outcome["eval_seconds"], loss=outcome["loss"])
    return float(outcome["loss"])


def score(run: ScoringRun) -> Scored:
    try:
        meta = json.loads((run.protected / "meta.json").read_text())
    except (OSError, ValueError) as ex:
        raise InfrastructureError(f"the prepared evaluation settings are unreadable ({ex})") from None
    run.details["eval"] = meta["eval"]
    loss = evaluate(run, export(run, meta["eval"]))
    return Scored(loss, "the forward pass uses only allowed operations; evaluated on the held-out tokens")


if __name__ == "__main__":
    sys.exit(main(score))
