"""`rebench calibrate`: measure the starting and reference solutions on this hardware and write an anchors file.

Timing anchors hold only on the hardware they were measured on (the paper's full-scale ones on H100s, the smoke ones
on a 2-core CPU). Calibration runs the environment's sandbox check (no agent: its setup scores the starting solution,
then the reference is installed and scored) N times in the chosen sandbox, reports the mean and spread of y for
each, and writes a JSON anchors file that `-T anchors=FILE` makes a task use. The anchors it compares with are the
built-in ones of the scale: the paper's at full scale, the CPU-measured smoke anchors at smoke scale. For
environments whose anchors are not timings (losses, win rates, solve fractions) the file only checks the built-in
anchors: it records the measurements and keeps them.
"""

import platform
import statistics
from datetime import UTC, datetime
from importlib.metadata import version

from inspect_ai.solver import Generate, Solver, TaskState, chain, solver
from inspect_ai.util import sandbox, store

from .. import DISTRIBUTION
from ..runtime.state import current_layout
from ..spec.anchors import ANCHORS_FILE_KIND
from ..spec.environment import EnvironmentSpec, ResolvedEnvironment, Scale, Transform
from ..spec.normalise import normalise_unclipped, raw_from_y, transform

HARDWARE_STORE_KEY = "rebench:hardware"
# What a calibration records about the sandbox it ran in (run inside the sandbox, as root).
HARDWARE_PROBE = (
    # cpus: what the sandbox may use; logical_cpus: the host's, which os.cpu_count() and psutil report in a container
    "echo cpus=$(nproc); echo logical_cpus=$(getconf _NPROCESSORS_ONLN); echo machine=$(uname -m); "
    "nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | sed 's/^/gpu=/'; "
    '"$REBENCH_PYTHON" -c "import sys; print(\'python=\' + sys.version.split()[0])"; '
    '"$REBENCH_PYTHON" -c "import torch; print(\'torch=\' + torch.__version__)" 2>/dev/null; true'
)


def is_timing_environment(environment: EnvironmentSpec) -> bool:
    """Run-time metrics (ln seconds / ln ms) depend on the hardware; losses, win rates and solve fractions do not."""
    return environment.transform is Transform.LOG


def spread(environment: EnvironmentSpec, raws: list[float]) -> dict:
    ys = [transform(environment.transform, raw) for raw in raws]
    return {
        "runs": len(raws),
        "raw_values": raws,
        "y_mean": statistics.fmean(ys),
        "y_std": statistics.stdev(ys) if len(ys) > 1 else 0.0,
        "y_min": min(ys),
        "y_max": max(ys),
        "raw_at_y_mean": raw_from_y(environment.transform, statistics.fmean(ys)),
    }


def measurements(logs: list) -> tuple[list[float], list[float], list[dict]]:
    """Raw values of the starting and the reference solution from sandbox-check logs, and the hardware seen.

    Each sample (one per epoch) measures both: its check's `starting` entry is the score log's first, scored at setup
    before the reference is installed, and its `reference` entry the final scoring run's.
    """
    start: list[float] = []
    reference: list[float] = []
    hardware: list[dict] = []
    for log in logs:
        for sample in log.samples or []:
            if sample.error is not None:
                raise RuntimeError(
                    f"a calibration run failed ({sample.id}, epoch {sample.epoch}): {sample.error.message}"
                )
            check = sample.scores["anchors_reproduced"]
            if not check.metadata:
                raise RuntimeError(f"{sample.id}, epoch {sample.epoch}: {check.explanation}")
            for solution, measured in (("starting", start), ("reference", reference)):
                entry = check.metadata[solution]
                if not entry["valid"]:
                    raise RuntimeError(
                        f"{sample.id}, epoch {sample.epoch}: the {solution} solution's scoring run was invalid: "
                        f"{entry['message']}"
                    )
                measured.append(entry["raw"])
            if sample.store.get(HARDWARE_STORE_KEY):
                hardware.append(sample.store[HARDWARE_STORE_KEY])
    return start, reference, hardware


def anchors_document(
    resolved: ResolvedEnvironment, start: list[float], reference: list[float], hardware: list[dict]
) -> dict:
    """The anchors file's content: `resolved`'s anchors (the scale's built-in ones) and the measurements."""
    environment, scale, built_in = resolved.spec, resolved.scale, resolved.anchors
    start_stats, reference_stats = spread(environment, start), spread(environment, reference)
    replaced = is_timing_environment(environment)
    y_start, y_ref = (
        transform(environment.transform, built_in.start),
        transform(environment.transform, built_in.reference),
    )
    return {
        "kind": ANCHORS_FILE_KIND,
        "environment": environment.name,
        "scale": scale,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "hardware": hardware[0] if hardware else {},
        "software": {
            "rebench": version(DISTRIBUTION),
            "inspect_ai": version("inspect_ai"),
            "host": platform.platform(),
        },
        "transform": environment.transform.value,
        "measured": {"start": start_stats, "reference": reference_stats},
        # Timing anchors are replaced by the measured means (in y); the others keep the built-in values.
        "replaces_built_in_anchors": replaced,
        "anchors": {
            "start": start_stats["raw_at_y_mean"] if replaced else built_in.start,
            "reference": reference_stats["raw_at_y_mean"] if replaced else built_in.reference,
        },
        # The scale's own anchors: the paper's at full scale, CPU-measured at smoke scale (the provenance says which).
        "built_in_anchors": {
            "start": built_in.start,
            "reference": built_in.reference,
            "provenance": built_in.provenance,
        },
        # Where the measured solutions land on the built-in scale (≈ 0 and ≈ 1 when those anchors hold here).
        "normalised_on_built_in_anchors": {
            "start": normalise_unclipped(start_stats["y_mean"], y_start, y_ref),
            "reference": normalise_unclipped(reference_stats["y_mean"], y_start, y_ref),
        },
    }


def parse_probe(output: str) -> dict:
    seen: dict = {"gpu": []}
    for line in output.splitlines():
        key, _, value = line.partition("=")
        if key == "gpu":
            seen["gpu"].append(value.strip())
        elif key and value:
            seen[key] = value.strip()
    return seen


@solver
def probe_hardware() -> Solver:
    """Record the sandbox's CPUs, GPUs and software in the sample's store (the anchors file names them)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        result = await sandbox().exec(
            ["sh", "-c", HARDWARE_PROBE], env={"REBENCH_PYTHON": current_layout().python}, timeout=120
        )
        store().set(HARDWARE_STORE_KEY, parse_probe(result.stdout))
        return state

    return solve


def run_calibration(name: str, runs: int, sandbox_type: str, scale: Scale, log_dir: str) -> dict:
    """Run the sandbox check `runs` times and return the anchors file's content."""
    from inspect_ai import eval

    from rebench.environments import TASKS, environment_named
    from rebench.maintenance import reference_solution

    from ..runtime.reference import sandbox_check_task

    environment = environment_named(name)
    task = sandbox_check_task(
        environment,
        TASKS[name](scale=scale, sandbox=sandbox_type),
        chain(probe_hardware(), reference_solution()),
    )
    logs = eval(task, model="none", epochs=runs, log_dir=log_dir, display="none")
    start, reference, hardware = measurements(logs)
    return anchors_document(environment.at(scale), start, reference, hardware)
