"""Smoke anchors measured where the sample runs: a timed environment's fixed smoke anchors were measured
once on an idle machine, so on a busy one its own reference scored 0.

At smoke scale, an environment with `smoke_anchor_runs` > 0 has each sample's setup score its starting and its
reference solution that many times each (interleaved, so a change of load affects both alike), in folders beside
the workspace under the root-only protected folder, with the environment's own scoring program. The anchors are the
means in transformed score; every score of the sample is normalised against them, and its metadata's
`anchors.provenance` lists the measured values. Full scale keeps the paper's anchors or a calibration file, and so
does a smoke run given `-T anchors=FILE`.
"""

import os
import statistics
from collections.abc import Sequence

from inspect_ai.log import transcript

from ..spec.environment import Anchors, ResolvedEnvironment, Transform
from ..spec.normalise import raw_from_y, transform
from .layout import SandboxLayout
from .scoring import SandboxService, ScoringInfrastructureError, checked_exec, run_program_in, write_tree
from .staging import reference_files, workspace_files

SOLUTIONS = ("start", "reference")


# The start of every measured anchors' provenance: `rebench report` puts runs whose anchors were each measured at
# their own setup in one row (their values differ by design; each is normalised on its own machine).
MEASURED_AT_SETUP = "measured at this sample's setup"


def measures_anchors(environment: ResolvedEnvironment) -> bool:
    """Whether a sample of this run measures its anchors at setup: a timed environment at smoke scale, unless a
    calibration file gave the anchors."""
    return environment.scale == "smoke" and environment.spec.smoke_anchor_runs > 0 and not environment.anchors_file


def _raw_at_mean(kind: Transform, raws: list[float]) -> float:
    """The raw value at the mean transformed score (the geometric mean for a time)."""
    return raw_from_y(kind, statistics.fmean(transform(kind, raw) for raw in raws))


async def measure_anchors(
    environment: ResolvedEnvironment, layout: SandboxLayout, services: Sequence[SandboxService] = ()
) -> Anchors:
    """Score the starting and the reference solution `smoke_anchor_runs` times each where scoring runs."""
    spec = environment.spec
    if "solve.sh" in reference_files(spec):
        raise ScoringInfrastructureError(f"{spec.name}: measured anchors need a reference made of files alone")
    scoring = layout.scoring_layout
    box = scoring.sandbox()
    folders = {solution: f"{scoring.protected}/anchor-runs/{solution}" for solution in SOLUTIONS}
    for solution, folder in folders.items():
        # The prepared workspace (the scorer may read its assets), then the solution's files over it.
        await checked_exec(
            ["sh", "-c", 'rm -rf "$1" && mkdir -p "$1" && cp -a "$2/." "$1/"', "copy", folder, scoring.workspace],
            box=box,
        )
        files = {**workspace_files(environment), **(reference_files(spec) if solution != "start" else {})}
        await write_tree(files, folder, box)
        if scoring.agent_user:
            await checked_exec(["chown", "-R", f"{scoring.agent_user}:{scoring.agent_user}", folder], box=box)
    load = os.getloadavg()[0]
    transcript().info(
        f"Measuring the smoke anchors on this machine: {spec.smoke_anchor_runs} scoring runs each of the "
        "starting and the reference solution…"
    )
    raws: dict[str, list[float]] = {solution: [] for solution in SOLUTIONS}
    for _ in range(spec.smoke_anchor_runs):
        for solution, folder in folders.items():
            here = scoring.model_copy(update={"workspace": folder})
            result = await run_program_in(environment, here, services)
            if not result.valid or result.raw is None:
                raise ScoringInfrastructureError(
                    f"measuring the smoke anchors: the {solution} solution scored invalid ({result.message})"
                )
            raws[solution].append(result.raw)
    await checked_exec(["rm", "-rf", f"{scoring.protected}/anchor-runs"], box=box)
    start, reference = (_raw_at_mean(spec.transform, raws[solution]) for solution in SOLUTIONS)
    if transform(spec.transform, start) == transform(spec.transform, reference):
        raise ScoringInfrastructureError("measuring the smoke anchors: start and reference scored the same")
    unit = f" {spec.raw_unit}" if spec.raw_unit else ""
    listed = {solution: ", ".join(f"{raw:.4g}" for raw in raws[solution]) for solution in SOLUTIONS}
    built_in = environment.anchors
    return Anchors(
        start=start,
        reference=reference,
        provenance=(
            f"{MEASURED_AT_SETUP} on the machine it ran on ({os.cpu_count()} CPUs, load average "
            f"{load:.1f} before): mean transformed score of {spec.smoke_anchor_runs} scoring runs each, "
            f"start {listed['start']}{unit}, reference {listed['reference']}{unit} (smoke scale; the built-in smoke "
            f"anchors {built_in.start:g} → {built_in.reference:g}{unit} are not used)"
        ),
    )
