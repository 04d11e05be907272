"""Setup work done once: concurrent samples share one preparation of a cache entry (issue 22), and a second
`rebench score` call prepares and trains nothing (issue 23): counted by the cache entries' completion markers, which
every build writes anew."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from inspect_ai import eval
from inspect_ai.solver import Generate, Solver, TaskState, solver

from rebench_inspect.runtime.reference import install_reference_solution, sandbox_check_task
from rebench_inspect.runtime.task import build_task
from tests.conftest import TOY_FOLDER

# A toy preparation that says each time it builds; it sleeps, so that two samples starting together overlap.
COUNTING_PREPARE = """
import os
import sys
import time
from pathlib import Path

from rebench.sandbox_lib import Preparation


def build(scale, workspace, protected, settings):
    with open(os.environ["REBENCH_TEST_BUILDS"], "a") as builds:
        builds.write("build\\n")
    time.sleep(2)
    (protected / "secret.txt").write_text("7")


PREPARATION = Preparation("toy", build, {"smoke": {}, "full": {}}, code=[Path(__file__)])

if __name__ == "__main__":
    sys.exit(PREPARATION.main())
"""


@pytest.fixture
def counting_toy(toy_environment, tmp_path, monkeypatch):
    """The toy environment with a preparation that logs its builds to the returned file; a cold cache."""
    folder = tmp_path / "toy"
    shutil.copytree(TOY_FOLDER, folder)
    (folder / "sandbox" / "prepare.py").write_text(COUNTING_PREPARE)
    builds = tmp_path / "builds.txt"
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("REBENCH_TEST_BUILDS", str(builds))
    return toy_environment.model_copy(update={"location": folder}), builds


@solver
def install_reference(environment) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        await install_reference_solution(environment.at("smoke"))
        return state

    return solve


def test_two_samples_on_a_cold_cache_prepare_once(counting_toy, tmp_path):
    environment, builds = counting_toy
    task = sandbox_check_task(
        environment,
        build_task(environment.at("smoke"), sandbox="local", agent_user=None),
        install_reference(environment),
    )
    # the sandbox check's one sample, twice at once
    [log] = eval(task, model="none", display="none", log_dir=str(tmp_path / "logs"), epochs=2, max_samples=2)
    assert log.status == "success", log.error
    assert len(log.samples) == 2 and all(sample.error is None for sample in log.samples)
    assert builds.read_text().splitlines() == ["build"], "the two samples prepared the cache entry once"
    cached = sorted(path.name for path in (tmp_path / "cache" / "toy").iterdir())
    assert [name for name in cached if name.startswith(".") and not name.endswith(".lock")] == []
    assert len([name for name in cached if name.startswith("smoke-")]) == 1


def test_prepare_warms_the_cache_once_sweeps_killed_builds_and_lists_entries_with_sizes(
    counting_toy, tmp_path, monkeypatch, capsys
):
    from rebench.environments import ENVIRONMENTS, TASKS
    from rebench_inspect import cli

    environment, builds = counting_toy
    monkeypatch.setitem(ENVIRONMENTS, "toy", environment)
    monkeypatch.setitem(
        TASKS, "toy", lambda scale="full", anchors=None, **kwargs: build_task(environment.at(scale, anchors), **kwargs)
    )
    monkeypatch.setattr(cli.arguments, "environment_names", lambda: sorted(ENVIRONMENTS))
    killed = tmp_path / "cache" / "toy" / ".smoke-0123456789abcdef.build-killed"
    (killed / "protected").mkdir(parents=True)
    assert cli.main(["prepare", "toy"]) == 0
    assert cli.main(["prepare", "toy", "--scale", "smoke"]) == 0
    assert builds.read_text().splitlines() == ["build"]
    assert not killed.exists()
    assert cli.main(["prepare"]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[-3] == f"cache {tmp_path / 'cache'}:"
    size, unit, entry, state = listing[-2].split(maxsplit=3)
    assert entry.startswith("toy/smoke-") and state.startswith("(complete, built in") and unit in ("B", "KB")
    assert listing[-1].split()[2:] == ["in", "all"]


def test_prepare_scores_with_the_environments_own_task(tmp_path, monkeypatch, capsys):
    # rust_codecontests' scoring needs its model proxy (a service) and its instructions a run field (the API
    # budget): warming its cache once ran a bare task without either, and failed with a traceback.
    from rebench_inspect import cli

    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    assert cli.main(["prepare", "rust_codecontests"]) == 0
    assert "rust_codecontests: prepared in" in capsys.readouterr().out


def built_entries(cache: Path) -> dict[str, int]:
    """Every complete cache entry with the time its marker was written: a rebuilt entry has a new one."""
    return {str(marker.parent.relative_to(cache)): marker.stat().st_mtime_ns for marker in cache.glob("*/*/complete")}


def environment_entries(cache: Path, name: str) -> dict[str, int]:
    """The environment's complete entries that setup and scoring build (not the tests' reference results, which the
    other lane of CI may build meanwhile: `rebench_inspect.testing.fixtures.cached_reference_result`)."""
    return {
        entry: written
        for entry, written in built_entries(cache).items()
        if entry.startswith(f"{name}/") and not entry.startswith(f"{name}/reference-smoke-")
    }


# optimize_llm_foundry scores a submission whose finetune.sh fails at once: its scorer trains (or finds) the cached
# reference before it runs the submission, and two runs of the starting script would add minutes to CI.
FAILING_FINETUNE = {"solution/finetune.sh": "#!/bin/bash\nexit 3\n"}


@pytest.mark.parametrize(
    "name, trained, submission",
    [
        # its starting model, trained by the workspace's train.py
        pytest.param("restricted_mlm", "restricted_mlm/start-model-", None, id="restricted_mlm"),
        # its generated corpus: each setup makes a fresh trainer folder, and took seconds
        pytest.param("scaling_law", None, None, id="scaling_law"),
        pytest.param(
            "optimize_llm_foundry",
            "optimize_llm_foundry/reference-",
            FAILING_FINETUNE,
            marks=pytest.mark.slow,
            id="optimize_llm_foundry",
        ),
    ],
)
def test_a_second_score_call_prepares_and_trains_nothing(name, trained, submission, tmp_path):
    """In the run's own cache (CI's, shared by its tests): what the first call builds, or finds built by an earlier
    test (restricted_mlm's starting model, optimize_llm_foundry's reference: a cold cache cost this test minutes of
    CI), the second call reuses."""
    from rebench.environments import ENVIRONMENTS
    from rebench.sandbox_lib.paths import cache_root
    from rebench_inspect.runtime.sandbox import local_problems
    from rebench_inspect.runtime.workspace_score import score_workspace

    if missing := local_problems(ENVIRONMENTS[name]):
        pytest.skip("; ".join(missing))
    cache = cache_root()
    workspace = None  # the starting workspace
    if submission:
        workspace = tmp_path / "workspace"
        for relative, text in submission.items():
            (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
            (workspace / relative).write_text(text)
    # One scoring run per call: measuring a timed environment's smoke anchors would add four runs of optimize_llm_
    # foundry's (minutes) to each call, and the first scoring run trains the cached reference whatever it scores.
    first = score_workspace(ENVIRONMENTS[name].at("smoke"), workspace, measure_anchors=False)
    built = environment_entries(cache, name)
    for prefix in [f"{name}/smoke-", *([trained] if trained else [])]:
        assert any(entry.startswith(prefix) for entry in built), (prefix, sorted(built))
    second = score_workspace(ENVIRONMENTS[name].at("smoke"), workspace, measure_anchors=False)
    assert environment_entries(cache, name) == built, "the second call built no cache entry again"
    # each call ended in the scorer's verdict on what it scored
    assert first["valid"] is second["valid"] is (submission is None), (first["message"], second["message"])


def test_a_timed_smoke_environment_normalises_against_anchors_measured_at_setup(toy_environment, tmp_path, monkeypatch):
    """The toy's starting answer is 10 s and its reference 5 s; its fixed anchors say 100 → 50, which would put the
    reference at 4.3. Measured at setup, the reference lands at 1 and the provenance lists the runs."""
    from rebench_inspect.runtime.workspace_score import score_workspace
    from rebench_inspect.spec.environment import Anchors

    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    fixed = Anchors(start=100.0, reference=50.0, provenance="fixed")
    timed = toy_environment.model_copy(update={"anchors": {"smoke": fixed, "full": fixed}, "smoke_anchor_runs": 2})
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "answer.txt").write_text("5")
    result = score_workspace(timed.at("smoke"), tmp_path / "ws")
    assert result["valid"] and result["normalised"] == pytest.approx(1.0)
    assert (result["anchors"]["raw_start"], result["anchors"]["raw_reference"]) == pytest.approx((10.0, 5.0))
    assert result["anchors"]["provenance"].startswith("measured at this sample's setup on the machine it ran on")
    assert "2 scoring runs each, start 10, 10, reference 5, 5" in result["anchors"]["provenance"]
    # without measuring (and at full scale, which never measures) the fixed anchors hold
    unmeasured = score_workspace(timed.at("smoke"), tmp_path / "ws", measure_anchors=False)
    assert unmeasured["anchors"]["provenance"] == "fixed" and unmeasured["normalised"] == pytest.approx(4.32, abs=0.01)


def test_a_score_call_starts_no_control_server(toy_environment, tmp_path, monkeypatch):
    # Inspect starts an HTTP control server for every eval unless told not to: about half a second of each
    # `rebench score` call, for an endpoint nobody watches.
    from inspect_ai._control.server import ControlServer

    from rebench_inspect.runtime.workspace_score import score_workspace

    started = []

    async def start(server: ControlServer) -> None:
        started.append(server)
        raise OSError("a control server was started")

    monkeypatch.setattr(ControlServer, "start", start)
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "answer.txt").write_text("5")
    assert score_workspace(toy_environment.at("smoke"), tmp_path / "ws")["valid"]
    assert started == []


@pytest.mark.parametrize("name", ["finetune_target", "fix_embedding", "restricted_mlm", "scaling_law"])
def test_a_preparation_program_imports_torch_only_to_build(name):
    # Every sample's setup runs its environment's preparation program; with the assets cached, it needs no torch,
    # whose import took 2-4 s of each setup and each `rebench score` call on a 2-core machine.
    loaded = subprocess.run(
        [sys.executable, "-c", f"import sys, rebench.{name}.sandbox.prepare; print('torch' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert loaded.stdout.strip() == "False"
