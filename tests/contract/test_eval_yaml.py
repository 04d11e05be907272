"""Every environment's `eval.yaml` (the Inspect Evals register's metadata, docs/register.md) agrees with its spec and
its task: name, sample counts, GPUs, version. Checked for every discovered environment and for one written from
docs/CONTRACT.md alone, so a new environment is held to it the day its folder appears."""

import subprocess
import sys
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS, TASKS
from rebench.maintenance import reference_solution
from rebench_inspect.runtime.reference import sandbox_check_task
from rebench_inspect.runtime.task import build_task
from rebench_inspect.spec.environment import EnvironmentSpec
from rebench_inspect.spec.register import TaskVersion, parse_version, read_eval_yaml, task_version
from tests.machinery.test_contract import build_environment

REPOSITORY = Path(__file__).resolve().parents[2]
# What the register lists for every entry (inspect-evals-lint's required fields, the paper and the version).
REQUIRED = ("title", "description", "arxiv", "group", "contributors", "version", "tasks")


def disagreements(environment: EnvironmentSpec, task) -> list[str]:
    """Where `environment`'s eval.yaml says something its spec or its built `task` does not."""
    listing = read_eval_yaml(environment.folder)
    found = [f"no {field}" for field in REQUIRED if not listing.get(field)]
    if listing.get("arxiv") != "https://arxiv.org/abs/2411.15114":
        found.append(f"arxiv {listing.get('arxiv')!r} is not the RE-Bench paper")
    version = parse_version(listing.get("version"))
    if (task.version, task.metadata["full_task_version"]) != (version.comparability, version.full):
        found.append(f"the task carries version {task.version!r}, eval.yaml says {version.full}")
    tasks = {entry["name"]: entry for entry in listing.get("tasks", [])}
    if tasks.get(environment.name, {}).get("dataset_samples") != len(task.dataset):
        found.append(f"tasks: {environment.name} with dataset_samples {len(task.dataset)} expected, got {tasks}")
    check = tasks.get("sandbox_check", {})
    expected_check = (len(sandbox_check_task(environment, task, reference_solution()).dataset), "maintenance")
    if (check.get("dataset_samples"), check.get("kind")) != expected_check:
        found.append(f"tasks: sandbox_check as {expected_check} expected, got {check}")
    if f"environment={environment.name}" not in check.get("comment", ""):
        found.append("the sandbox_check entry does not say how to run it for this environment")
    metadata = listing.get("metadata", {})
    if metadata.get("sandbox") != ["solver", "scorer"]:
        found.append(f"metadata.sandbox {metadata.get('sandbox')!r}: the agent and the scorer both use the sandbox")
    gpus = environment.resources.gpus
    expected_gpu = {"count": gpus, "products": [environment.resources.gpu_kind]} if gpus else None
    if metadata.get("requires", {}).get("gpu") != expected_gpu:
        found.append(f"metadata.requires.gpu {metadata.get('requires')!r}, the spec asks for {expected_gpu}")
    return found


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_every_environments_eval_yaml_agrees_with_its_spec_and_task(name):
    environment = ENVIRONMENTS[name]
    assert (environment.folder / "eval.yaml").is_file(), f"tasks/{name}/eval.yaml is missing"
    task = TASKS[name](scale="smoke", sandbox="local")
    assert disagreements(environment, task) == []
    # the image the listing tells users to build exists
    assert f"rebench images build {name}" in read_eval_yaml(environment.folder)["metadata"]["environment"]
    assert (REPOSITORY / "sandboxes" / name / "Dockerfile").is_file()


def test_an_environment_written_from_the_contract_has_an_eval_yaml_its_task_agrees_with(tmp_path):
    module = build_environment(tmp_path / "toy_contract")
    task = module.toy_contract(scale="smoke", sandbox="local")
    assert disagreements(module.ENVIRONMENT, task) == []


def test_a_disagreeing_eval_yaml_is_caught(tmp_path):
    """The check is not vacuous: an environment whose listing asks for the wrong GPUs and samples fails it."""
    module = build_environment(tmp_path / "toy_contract")
    path = tmp_path / "toy_contract" / "eval.yaml"
    path.write_text(
        path.read_text().replace("dataset_samples: 1", "dataset_samples: 3") + "  requires:\n    gpu: true\n"
    )
    found = disagreements(module.ENVIRONMENT, module.toy_contract(scale="smoke", sandbox="local"))
    assert any("dataset_samples 1 expected" in problem for problem in found), found
    assert any("metadata.requires.gpu" in problem for problem in found), found


# How `inspect eval tasks/<env>/task.py@<env>` loads a task: from the file, not as a module of the package.
LOAD_BY_PATH = (
    "import sys\n"
    "from inspect_ai._eval.loader import load_task_spec\n"
    "for path, name in zip(sys.argv[1::2], sys.argv[2::2]):\n"
    "    [task] = load_task_spec(f'{path}@{name}', {'scale': 'smoke', 'sandbox': 'local'})\n"
    "    print(name, task.version)\n"
)


def test_every_task_loads_from_its_file_as_the_registers_usage_runs_it(tmp_path):
    """The register's page runs an entry's `task_path` (docs/register.md), so a task.py must not import its siblings
    relatively: loaded from its file it is not a module of the package."""
    names = sorted(ENVIRONMENTS)
    arguments = [part for name in names for part in (str(ENVIRONMENTS[name].folder / "task.py"), name)]
    loaded = subprocess.run(
        [sys.executable, "-c", LOAD_BY_PATH, *arguments], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert loaded.returncode == 0, loaded.stderr[-2000:]
    versions = [str(task_version(ENVIRONMENTS[name].folder).comparability) for name in names]
    assert loaded.stdout.split() == [part for pair in zip(names, versions) for part in pair]


@pytest.mark.parametrize("text, version", [("1-A", TaskVersion(1, "A")), ("12-BC", TaskVersion(12, "BC"))])
def test_versions_follow_the_registers_scheme(text, version):
    assert parse_version(text) == version
    assert version.full == text


@pytest.mark.parametrize("text", ["1", "1.0", "0-A", "1-a", "A-1", " 1-A", 1, None])
def test_a_version_outside_the_scheme_is_refused(text):
    with pytest.raises(ValueError, match="version must be N-X"):
        parse_version(text)


def test_a_task_without_eval_yaml_is_refused_naming_the_file(toy_environment, tmp_path):
    import shutil

    folder = shutil.copytree(toy_environment.folder, tmp_path / "toy")
    (folder / "eval.yaml").unlink()
    with pytest.raises(ValueError, match="toy/eval.yaml: unreadable"):
        build_task(toy_environment.model_copy(update={"location": folder}).at("smoke"), sandbox="local")
    assert task_version(toy_environment.folder) == TaskVersion(1, "A")
