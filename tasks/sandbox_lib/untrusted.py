"""Run the agent's code in its own process: unprivileged, time-limited, with bounded output.

Scoring programs run as root; everything that imports or executes files from the agent's workspace goes through
`run_untrusted` (or uses `demote_to` as the `preexec_fn` of its own subprocess) so that it cannot touch the
scoring program, the held-out data or the Python installation.
"""

import contextlib
import os
import pwd
import resource
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .leftovers import offer_to_oom_killer
from .program import Invalid
from .result import Reason

# Largest file the agent's process may write; stops an output flood from filling the disk.
DEFAULT_FILE_SIZE_LIMIT = 64 * 1024 * 1024
OUTPUT_TAIL_BYTES = 4000
NO_PROCESS_LEFT = Reason("the agent's code could not start: its user had no process left (each user's are limited)")


def demote_to(
    user: str | None, file_size_limit: int = DEFAULT_FILE_SIZE_LIMIT, memory_limit: int | None = None
) -> Callable[[], None]:
    """A `preexec_fn`: new session, file-size limit, optional address-space cap, first in line for the OOM killer
    (`leftovers.offer_to_oom_killer`: when memory runs out, the agent's code dies, not root's scoring program), and
    (when `user` is given) drop root to that user."""
    account = pwd.getpwnam(user) if user else None

    def preexec() -> None:
        os.setsid()
        offer_to_oom_killer()
        resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
        if memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (memory_limit, memory_limit))
        if account is not None:
            os.setgroups([])
            os.setgid(account.pw_gid)
            os.setuid(account.pw_uid)
            os.environ["HOME"] = account.pw_dir

    return preexec


@dataclass
class UntrustedRun:
    returncode: int | None
    timed_out: bool
    stdout_tail: str
    stderr_tail: str

    @property
    def ok(self) -> bool:
        return not self.timed_out and self.returncode == 0

    def describe(self) -> str:
        if self.timed_out:
            return "timed out"
        if self.returncode and self.returncode < 0:
            return f"killed by signal {signal.Signals(-self.returncode).name}"
        return f"exited with status {self.returncode}"


def kill_process_group(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


def _tail(path: Path) -> str:
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - OUTPUT_TAIL_BYTES))
        return f.read().decode("utf-8", errors="replace")


def run_untrusted(
    cmd: Sequence[str],
    *,
    cwd: Path,
    user: str | None,
    timeout: float,
    env: Mapping[str, str] | None = None,
    file_size_limit: int = DEFAULT_FILE_SIZE_LIMIT,
    memory_limit: int | None = None,
) -> UntrustedRun:
    """Run `cmd` as `user`, kill its whole process group on timeout, keep only the tail of its output. Unless `env`
    names a TMPDIR, the process gets a private one, removed afterwards: not the scoring program's (root's alone,
    `program.use_scratch`), nor the /tmp the agent can fill, nor one other processes of the agent could watch."""
    environment = dict(env) if env is not None else dict(os.environ)
    account = pwd.getpwnam(user) if user else None
    if account is not None:
        # demote_to's HOME only reaches the child when it inherits this process's environment
        environment["HOME"] = account.pw_dir
    own_temp = env is None or "TMPDIR" not in env
    with (
        tempfile.TemporaryDirectory(prefix="rebench-untrusted-") as tmp,
        tempfile.TemporaryDirectory(prefix="rebench-untrusted-temp-", ignore_cleanup_errors=True) as temp,
    ):
        if own_temp:
            if account is not None:
                os.chown(temp, account.pw_uid, account.pw_gid)
            environment["TMPDIR"] = temp
        out_path, err_path = Path(tmp) / "stdout", Path(tmp) / "stderr"
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            try:
                process = subprocess.Popen(
                    list(cmd),
                    cwd=cwd,
                    env=environment,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    preexec_fn=demote_to(user, file_size_limit, memory_limit),
                )
            except BlockingIOError:
                if not user:
                    raise
                # EAGAIN from exec after the switch to `user`: that user is at its process limit (RLIMIT_NPROC,
                # docs/security-model.md, "Limits"), which its own processes used up: the agent's doing, not the
                # machine's.
                raise Invalid(NO_PROCESS_LEFT) from None
            try:
                returncode: int | None = process.wait(timeout=timeout)
                timed_out = False
            except subprocess.TimeoutExpired:
                returncode, timed_out = None, True
            finally:
                # Also reaps anything the agent's code left running in the background.
                kill_process_group(process)
                process.wait()
        return UntrustedRun(returncode, timed_out, _tail(out_path), _tail(err_path))
