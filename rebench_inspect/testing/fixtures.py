"""rebench's pytest fixtures for every environment (tests/conftest.py loads this plugin beside plugin.py).

A test names its environment through the fixture `environment` (an `EnvironmentSpec`): a folder's conftest defines it
for the tests of one environment (`tests/<env>/`), and a test parametrised over every discovered environment passes
it as a parameter (`tests/contract/test_end_to_end.py`). On that, every environment gets the same fixtures:

- `smoke_assets`: its workspace laid out as the task's setup lays it out at smoke scale (the starting files, then the
  preparation program run with --setup) and its protected folder; prepared once per session per environment, from
  the content-keyed cache of prepared assets after the first session;
- `scoring_dirs`: fresh copies of those two folders, for one test to score in or to change;
- `score_workspace(workspace, protected, **options)`: the scoring program's result for that environment, the program
  staged and started by the host's own builders (`programs.scoring_result`);
- `reference_result`: the files its reference solution writes over the prepared workspace (the reference files,
  then what `solve.sh` makes there), cached by the code that decides them, so a model is trained once per machine;
- `smoke_eval(environment, model, solver=None, model_roles=None, **task_args)`: one eval of its own task at smoke
  scale on Inspect's local sandbox, returning the `EvalLog` (`scored_sample(log)`: its sample and final score);
- `second_user` and `second_user_scoring_dirs`: another user that can run this interpreter, and fresh copies whose
  workspace it owns, for scoring as the agent's user (`run_as`).
"""

import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Final

import pytest
from inspect_ai import eval as inspect_eval
from inspect_ai.log import EvalLog, EvalSample
from inspect_ai.model import Model
from inspect_ai.scorer import Score
from inspect_ai.solver import Solver

from rebench.sandbox_lib.cache import cached_entry
from rebench.sandbox_lib.paths import cache_root
from rebench_inspect import EnvironmentSpec
from rebench_inspect.runtime.reference import REFERENCE_SCRIPT
from rebench_inspect.runtime.scoring import SCORER_NAME
from rebench_inspect.runtime.smoke import PROVIDER
from rebench_inspect.runtime.staging import copy_workspace, reference_files, staged_tree, workspace_files
from rebench_inspect.spec.anchors import ANCHORS_FILE_KIND

from .model_server import ModelServer, smoke_responder
from .programs import run_preparation, scoring_result

SCALE: Final = "smoke"
# Under the cache entry, beside its completion marker: what goes over a workspace.
REFERENCE_FILES = "workspace"


@dataclass(frozen=True)
class PreparedAssets:
    workspace: Path
    protected: Path

    def copy_to(self, destination: Path) -> tuple[Path, Path]:
        """Fresh copies `<destination>/workspace` and `<destination>/protected` (links kept as links)."""
        workspace, protected = destination / "workspace", destination / "protected"
        shutil.copytree(self.workspace, workspace, symlinks=True)
        shutil.copytree(self.protected, protected, symlinks=True)
        return workspace, protected


def prepare_smoke_assets(environment: EnvironmentSpec, root: Path) -> PreparedAssets:
    """Lay out `<root>/workspace` and `<root>/protected` as the task's setup does at smoke scale."""
    assets = PreparedAssets(root / "workspace", root / "protected")
    copy_workspace(environment.at(SCALE), assets.workspace)
    assets.protected.mkdir(mode=0o700)
    if environment.prepare_script is not None:
        completed = run_preparation(environment, assets.workspace, assets.protected, scale=SCALE, setup=True)
        assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    return assets


def _file_digests(root: Path) -> dict[str, str]:
    """Every file under `root` (a link by its target, not followed) to a digest of its content."""
    digests = {}
    for folder, folders, files in os.walk(root):
        folders[:] = [name for name in folders if name != "__pycache__"]
        for name in [*files, *(name for name in folders if os.path.islink(os.path.join(folder, name)))]:
            path = Path(folder, name)
            content = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            digests[str(path.relative_to(root))] = hashlib.sha256(content).hexdigest()
    return digests


def reference_key(environment: EnvironmentSpec) -> str:
    """Hash of what decides the reference's result at smoke scale: the staged tree (preparation code and its
    settings), the starting files and the reference files."""
    digest = hashlib.sha256(SCALE.encode())
    for tree in (staged_tree(environment), workspace_files(environment.at(SCALE)), reference_files(environment)):
        for relative, path in sorted(tree.items()):
            digest.update(relative.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def smoke_model_names(environment: EnvironmentSpec) -> list[str]:
    """The offline smoke models (`rebench_smoke/<name>`) its task gives its model roles at smoke scale."""
    from rebench.environments import TASKS  # discovery imports every environment: only when asked

    roles = TASKS[environment.name](scale=SCALE, sandbox="local").model_roles or {}
    names = [str(model).partition("/") for model in roles.values()]
    return [name for provider, _, name in names if provider == PROVIDER]


def _run_reference_script(workspace: Path, model_env: dict[str, str]) -> None:
    completed = subprocess.run(
        ["bash", REFERENCE_SCRIPT],
        cwd=workspace,
        env={**os.environ, **model_env, "REBENCH_SCALE": SCALE, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]


def _build_reference(environment: EnvironmentSpec, assets: PreparedAssets, entry: Path) -> None:
    """Run the reference in a copy of the prepared workspace, as `install_reference_solution` does in a sandbox
    (a model it calls answers as the task's one smoke model role, here at OPENAI_BASE_URL, there through the
    proxy); keep the files it added or changed in `<entry>/workspace`."""
    with tempfile.TemporaryDirectory(prefix=f"rebench-reference-{environment.name}-") as scratch:
        workspace = Path(scratch) / "workspace"
        shutil.copytree(assets.workspace, workspace, symlinks=True)
        before = _file_digests(workspace)
        files = reference_files(environment)
        for relative, source in files.items():
            (workspace / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, workspace / relative)
        if REFERENCE_SCRIPT in files:
            models = smoke_model_names(environment)
            if len(models) == 1:
                with ModelServer(smoke_responder(models[0])) as server:
                    _run_reference_script(workspace, server.env)
            else:
                _run_reference_script(workspace, {})
        for relative, digest in _file_digests(workspace).items():
            if before.get(relative) != digest:
                (entry / REFERENCE_FILES / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(workspace / relative, entry / REFERENCE_FILES / relative, follow_symlinks=False)


def cached_reference_result(environment: EnvironmentSpec, assets: PreparedAssets) -> Path:
    """The folder of files the reference solution writes over the prepared smoke workspace (built once per key)."""
    entry = cache_root() / environment.name / f"reference-{SCALE}-{reference_key(environment)}"
    # The environment's cache folder also holds its held-out data: root-only, whoever makes it first.
    entry.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    cached_entry(entry, partial(_build_reference, environment, assets))
    return entry / REFERENCE_FILES


def run_smoke_eval(
    environment: EnvironmentSpec,
    model: str | Model = "none",
    solver: Solver | None = None,
    model_roles: dict[str, str | Model] | None = None,
    **task_args: Any,
) -> EvalLog:
    """One eval of the environment's own task at smoke scale on the local sandbox, as this user (no agent user)
    unless `task_args` say otherwise; `solver` replaces the agent (`model` "none" with it)."""
    from rebench.environments import TASKS  # discovery imports every environment: only when an eval runs

    options = {"scale": SCALE, "sandbox": "local", "agent_user": None, "time_budget_hours": 0.5, **task_args}
    task = TASKS[environment.name](**options)
    [log] = inspect_eval(task, model=model, solver=solver, model_roles=model_roles, display="none", log_dir=None)
    return log


def scored_sample(log: EvalLog) -> tuple[EvalSample, Score]:
    """The one sample of a smoke eval that must have succeeded, and its final score (`rebench_scorer`)."""
    assert log.status == "success", log.error
    assert log.samples is not None
    [sample] = log.samples
    assert sample.scores is not None
    return sample, sample.scores[SCORER_NAME]


@pytest.fixture
def environment() -> EnvironmentSpec:
    raise pytest.UsageError(
        "this test names no environment: its folder's conftest defines the fixture `environment`, or the test is "
        "parametrised over `environment`"
    )


@pytest.fixture(scope="session")
def prepared_smoke_assets(tmp_path_factory: pytest.TempPathFactory) -> Callable[[EnvironmentSpec], PreparedAssets]:
    """The smoke assets of any environment, prepared at most once in this session."""
    prepared: dict[str, PreparedAssets] = {}

    def of(environment: EnvironmentSpec) -> PreparedAssets:
        if environment.name not in prepared:
            prepared[environment.name] = prepare_smoke_assets(
                environment, tmp_path_factory.mktemp(f"{environment.name}-smoke")
            )
        return prepared[environment.name]

    return of


@pytest.fixture
def smoke_assets(
    environment: EnvironmentSpec, prepared_smoke_assets: Callable[[EnvironmentSpec], PreparedAssets]
) -> PreparedAssets:
    return prepared_smoke_assets(environment)


@pytest.fixture
def scoring_dirs(smoke_assets: PreparedAssets, tmp_path: Path) -> tuple[Path, Path]:
    return smoke_assets.copy_to(tmp_path)


@pytest.fixture
def score_workspace(environment: EnvironmentSpec) -> Callable[..., dict]:
    """`score_workspace(workspace, protected, **options)`: the result for the test's environment."""
    return partial(scoring_result, environment)


@pytest.fixture
def reference_result(environment: EnvironmentSpec, smoke_assets: PreparedAssets) -> Path:
    return cached_reference_result(environment, smoke_assets)


@pytest.fixture
def smoke_eval() -> Callable[..., EvalLog]:
    return run_smoke_eval


@pytest.fixture(scope="session")
def second_user() -> str:
    """An unprivileged user that can run this interpreter with torch: the image's `agent` where it exists (the Docker
    tier runs the tests that use this inside the images: tests/docker/test_hacks_in_container.py), else `nobody`.
    Skips without root or without such a user."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch users")
    for name in ("agent", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        probe = [sys.executable, "-c", "import torch"]
        if subprocess.run(["runuser", "-u", name, "--", *probe], capture_output=True, timeout=300).returncode == 0:
            return name
    pytest.skip(f"no user 'agent' or 'nobody' can run {sys.executable} with torch")


@pytest.fixture
def second_user_scoring_dirs(smoke_assets: PreparedAssets, second_user: str) -> Iterator[tuple[Path, Path]]:
    """Fresh copies whose workspace `second_user` owns, as the agent user owns its own, to score with --run-as:
    in a folder every user can pass through (`tmp_path` is private to the user running the tests)."""
    user = pwd.getpwnam(second_user)
    root = Path(tempfile.mkdtemp(prefix=f"rebench-{second_user}-scoring-"))
    try:
        os.chmod(root, 0o755)
        workspace, protected = smoke_assets.copy_to(root)
        for folder, _, files in os.walk(workspace):
            for path in [folder, *(os.path.join(folder, name) for name in files)]:
                os.lchown(path, user.pw_uid, user.pw_gid)
        yield workspace, protected
    finally:
        shutil.rmtree(root, ignore_errors=True)


def fixed_smoke_anchors(environment: EnvironmentSpec) -> str | None:
    """For a timed environment, an anchors file (`-T anchors=FILE`, `rebench score --anchors FILE`) that keeps its
    built-in smoke anchors: its samples then skip measuring the anchors at setup (`smoke_anchor_runs` scoring runs each
    of the start and the reference), which only a test of normalised scores needs. None for the other environments."""
    if not environment.smoke_anchor_runs:
        return None
    path = Path(tempfile.gettempdir()) / f"rebench-fixed-smoke-anchors-{environment.name}.json"
    document = {
        "kind": ANCHORS_FILE_KIND,
        "environment": environment.name,
        "scale": "smoke",
        "replaces_built_in_anchors": False,
    }
    path.write_text(json.dumps(document))
    return str(path)
