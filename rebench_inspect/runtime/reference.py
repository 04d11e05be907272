"""The reference solver and the sandbox check (certify an image: start ≈ 0, reference ≈ 1)."""

import hashlib
import io
import json
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path

from inspect_ai import Task
from inspect_ai.dataset import Sample
from inspect_ai.log import transcript
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Scorer, Target, accuracy, scorer
from inspect_ai.solver import Solver, TaskState
from inspect_ai.util import sandbox

from ..spec.environment import EnvironmentSpec, ResolvedEnvironment
from ..spec.normalise import ScoreEntry
from .layout import SandboxLayout
from .scoring import ScoringInfrastructureError, checked_exec, score_log, write_tree
from .staging import reference_files
from .state import current_layout

REFERENCE_SCRIPT = "solve.sh"
# How far from 0 (start) and 1 (reference) a certified image may land: timings and judged scores are noisy.
SANDBOX_CHECK_TOLERANCE = 0.25


async def write_over_workspace(files: Mapping[str, Path]) -> None:
    """Write host files at their relative paths over the sample's workspace, owned by the agent user as the rest of
    the workspace is."""
    layout = current_layout()
    await write_tree(files, layout.workspace)
    if layout.agent_user:
        await sandbox().exec(["chown", "-R", f"{layout.agent_user}:{layout.agent_user}", layout.workspace])


async def install_reference_solution(environment: ResolvedEnvironment, reuse_earlier_run: bool = False) -> None:
    """Copy the reference files over the workspace, then run `solve.sh` there as the agent user if present.

    `reuse_earlier_run`: where an earlier run of `solve.sh` started from the same environment code, scale, kind of
    sandbox and prepared assets (`ReferenceRun`), write what it left instead of running it again (a smoke reference
    trains models for a minute; `rebench demo` reruns it only when asked)."""
    layout = current_layout()
    files = reference_files(environment.spec)
    await write_over_workspace(files)
    if REFERENCE_SCRIPT not in files:
        return
    earlier = await ReferenceRun.about_to_start(environment, layout) if reuse_earlier_run else None
    if earlier is not None and await earlier.write_what_it_left():
        return
    # It may train a model (minutes at smoke scale on a CPU): the transcript says what is running.
    transcript().info(f"Running the reference solution's {REFERENCE_SCRIPT} in the workspace…")
    started = time.monotonic()
    result = await sandbox().exec(
        ["bash", REFERENCE_SCRIPT],
        cwd=layout.workspace,
        user=layout.agent_user,
        env={"REBENCH_SCALE": environment.scale, "PYTHON": layout.python},
    )
    if not result.success:
        raise ScoringInfrastructureError(
            f"reference solution failed (exit {result.returncode}): {result.stderr[-3000:]} {result.stdout[-3000:]}"
        )
    transcript().info(f"Reference solution ready after {time.monotonic() - started:.0f} s.")
    if earlier is not None:
        await earlier.keep_what_it_left()


async def _workspace_digests(layout: SandboxLayout) -> dict[str, str]:
    """Every regular file under the workspace (relative path) with its SHA-256."""
    listing = await checked_exec(
        ["sh", "-c", 'cd "$1" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum', "list", layout.workspace]
    )
    digests = {}
    for line in listing.splitlines():
        digest, _, path = line.partition("  ")
        digests[path.removeprefix("./")] = digest
    return digests


def environment_code_digest(environment: EnvironmentSpec) -> str:
    """SHA-256 of an environment's folder (its task, staged programs, preparation and reference code) and of the
    package's folders staged beside it."""
    from importlib.resources import files

    digest = hashlib.sha256()
    folders = [environment.folder, *(Path(str(files("rebench"))) / name for name in environment.sandbox_libraries)]
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                digest.update(f"{folder.name}/{path.relative_to(folder).as_posix()}".encode() + b"\0")
                digest.update(path.read_bytes())
    return digest.hexdigest()


class ReferenceRun:
    """A run of the reference's `solve.sh`, kept on the host in the cache (`<cache>/<env>/reference-run-<scale>-<key>`,
    root-only as the rest of the environment's folder there): the files it added or changed in the workspace, and
    those it removed. The key hashes what the workspace it starts from is made of: the environment's code (its
    starting workspace and reference included), the scale, the kind of sandbox and the prepared assets' own key (their
    marker). Not the workspace's files themselves: setup writes some for each sample (e.g. the judge's address and
    key), which a reference's result does not depend on."""

    FILES, REMOVED = "files", "removed.json"

    def __init__(self, entry: Path, layout: SandboxLayout, before: dict[str, str]) -> None:
        self.entry, self.layout, self.before = entry, layout, before

    @classmethod
    async def about_to_start(cls, environment: ResolvedEnvironment, layout: SandboxLayout) -> "ReferenceRun":
        from rebench.sandbox_lib.paths import cache_root  # here, not at import: the registry import stays light
        from rebench.sandbox_lib.preparation import MARKER

        before = await _workspace_digests(layout)
        marker = await checked_exec(
            ["sh", "-c", 'cat "$1" 2>/dev/null || true', "marker", f"{layout.protected}/{MARKER}"]
        )
        inputs = [environment_code_digest(environment.spec), environment.scale, layout.is_container, marker]
        key = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
        entry = cache_root() / environment.name / f"reference-run-{environment.scale}-{key}"
        entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return cls(entry, layout, before)

    async def write_what_it_left(self) -> bool:
        """Write the kept run's result over the workspace; False when there is none."""
        from rebench.sandbox_lib.cache import is_complete

        if not is_complete(self.entry):
            return False
        kept = self.entry / self.FILES
        await write_over_workspace({p.relative_to(kept).as_posix(): p for p in kept.rglob("*") if p.is_file()})
        removed = json.loads((self.entry / self.REMOVED).read_text())
        if removed:
            await checked_exec(["rm", "-f", "--", *removed], cwd=self.layout.workspace)
        transcript().info(
            f"Reference solution: its {REFERENCE_SCRIPT} ran before from these same inputs; what it left is written "
            f"over the workspace instead of running it again (kept in {self.entry})."
        )
        return True

    async def keep_what_it_left(self) -> None:
        """Keep the files the run added, changed or removed in the workspace (read out of the sandbox in one
        archive), for the next run from the same inputs."""
        from rebench.sandbox_lib.cache import cached_entry

        after = await _workspace_digests(self.layout)
        written = sorted(path for path, digest in after.items() if self.before.get(path) != digest)
        removed = sorted(set(self.before) - set(after))
        archive = b""
        if written:
            archive_path = f"{self.layout.protected}/reference-run.tar"
            await checked_exec(["tar", "-c", "-f", archive_path, "--", *written], cwd=self.layout.workspace)
            try:
                archive = await sandbox().read_file(archive_path, text=False)
            finally:
                await checked_exec(["rm", "-f", archive_path])

        def build(folder: Path) -> None:
            (folder / self.FILES).mkdir()
            if archive:
                with tarfile.open(fileobj=io.BytesIO(archive)) as unpacked:
                    unpacked.extractall(folder / self.FILES, filter="data")
            (folder / self.REMOVED).write_text(json.dumps(removed))

        cached_entry(self.entry, build)


def solution_check(entry: ScoreEntry, expected: float) -> dict:
    """One solution's verdict from its score-log entry (the unclipped value, so a solution slower than the start
    shows how far off it is), with what a reader of the verdict needs to show it."""
    value = entry.normalised_unclipped
    passed = entry.valid and value is not None and abs(value - expected) <= SANDBOX_CHECK_TOLERANCE
    return {
        "expected": expected,
        "passed": passed,
        "label": entry.label,
        "valid": entry.valid,
        "raw": entry.raw,
        "normalised_unclipped": value,
        "message": entry.message,
    }


def normalised_text(value: float) -> str:
    return f"{round(value, 3) + 0.0:.3f}"  # + 0.0: no "-0.000"


def landed(check: dict) -> str:
    """Where a solution's check landed against what it expected, e.g. "normalised 0.327, expected 0 ± 0.25"."""
    value = check["normalised_unclipped"]
    found = f"invalid ({check['message'] or 'no message'})" if value is None else f"normalised {normalised_text(value)}"
    return f"{found}, expected {check['expected']:g} ± {SANDBOX_CHECK_TOLERANCE}"


@scorer(metrics=[accuracy()])
def anchors_reproduced() -> Scorer:
    """CORRECT when the starting solution lands near 0 and the reference near 1.

    Runs after `rebench_scorer`: the score log's first entry ("start") scored the untouched starting solution at
    setup, and the final pass appended its last entry, which scores the reference the solver installed. The
    metadata holds each solution's check (`starting`, `reference`: its entry's values, expected, passed).
    """

    async def score(state: TaskState, target: Target) -> Score:
        entries = score_log()
        labels = [entry.label for entry in entries]
        if len(labels) < 2 or labels[0] != "start" or labels[-1] != "final":
            # The setup scores the start and the final pass the reference: anything else is the harness's fault.
            return Score(
                value=INCORRECT,
                answer="no verdict",
                explanation=f"harness error: the score log's entries are {labels}, not the setup's 'start' first "
                "and the final pass's 'final' last, so the starting and the reference solution cannot be judged",
            )
        checks = {"starting": solution_check(entries[0], 0.0), "reference": solution_check(entries[-1], 1.0)}
        failed = [solution for solution, check in checks.items() if not check["passed"]]
        said = "; ".join(f"{solution} {landed(check)}" for solution, check in checks.items())
        return Score(
            value=INCORRECT if failed else CORRECT,
            answer=", ".join(f"{solution} {'FAIL' if solution in failed else 'PASS'}" for solution in checks),
            explanation=f"{' and '.join(failed)} failed: {said}" if failed else f"both passed: {said}",
            metadata=checks,
        )

    return score


def sandbox_check_task(environment: EnvironmentSpec, environment_task: Task, install: Solver) -> Task:
    """Run the environment's own task without an agent: its setup scores the starting solution (the score log's
    first entry), `install` installs the reference, and the final scoring pass scores it (the last entry).

    One sample per environment, with no target: `anchors_reproduced` judges both solutions.
    """
    scale = environment_task.metadata["scale"]  # type: ignore[index]
    return Task(
        # Titled by environment (the viewer lists logs by task name; `rebench demo` writes one log per environment).
        name=f"rebench/sandbox_check/{environment.name}",
        dataset=[
            Sample(
                id=environment.name,
                input="sandbox check: the starting solution (scored at setup), then the reference solution",
                metadata={"environment": environment.name, "scale": scale},
            )
        ],
        setup=environment_task.setup,
        solver=install,
        scorer=[*environment_task.scorer, anchors_reproduced()],  # type: ignore[misc]
        sandbox=environment_task.sandbox,
        model_roles=environment_task.model_roles,
        metadata={"environment": environment.name, "scale": scale, "kind": "maintenance"},
    )
