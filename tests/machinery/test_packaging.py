"""The installed package as Inspect sees it: entry point, namespace, light registry, CLI from any directory."""

import json
import os
import re
import subprocess
import sys
from importlib.metadata import distribution, entry_points
from pathlib import Path

import pytest

from rebench import environment_names
from rebench_inspect import DISTRIBUTION

REPOSITORY = Path(__file__).resolve().parents[2]


def test_entry_point_names_the_registry():
    [point] = [ep for ep in entry_points(group="inspect_ai") if ep.name == "rebench"]
    assert point.value == "rebench._registry"


def test_the_distribution_has_its_own_name_and_keeps_the_rebench_command_and_package():
    installed = distribution(DISTRIBUTION)
    assert installed.metadata["Name"] == "inspect-rebench"  # PyPI's `rebench` is another project
    [command] = [ep for ep in installed.entry_points if ep.group == "console_scripts"]
    assert (command.name, command.value) == ("rebench", "rebench_inspect.cli:main")
    assert installed.metadata["License-Expression"] == "MIT"
    assert (REPOSITORY / "LICENSE").read_text().startswith("MIT License")


def test_no_install_line_names_the_other_projects_distribution():
    """`pip install "rebench[...]"` would install PyPI's unrelated `rebench` (which has no such extras)."""
    texts = [REPOSITORY / "README.md", REPOSITORY / "pyproject.toml", *(REPOSITORY / "docs").rglob("*.md")]
    texts += [*(REPOSITORY / "rebench_inspect").rglob("*.py"), *(REPOSITORY / "tasks").glob("*/README.md")]
    wrong = [
        f"{path.name}: {match.group()}"
        for path in texts
        for match in re.finditer(r"(?<![\w-])rebench\[", path.read_text())
    ]
    assert wrong == []


# Every environment's task, the maintenance task and solver, as the entry point's module registers them: the names
# not found, one line (the register's lint cannot see this discovery; pyproject.toml, [tool.inspect-evals-lint]).
NAMES_AS_REGISTERED = (
    "import rebench._registry\n"
    "from rebench import environment_names\n"
    "from inspect_ai._util.registry import registry_lookup\n"
    "names = [('task', f'rebench/{name}') for name in environment_names()] + [('task', 'rebench/sandbox_check'),\n"
    "         ('solver', 'rebench/reference_solution')]\n"
    "print(len(names), [name for kind, name in names if registry_lookup(kind, name) is None])"
)
EVERY_NAME_FOUND = f"{len(environment_names()) + 2} []"


def test_tasks_and_solvers_are_under_rebench_in_this_editable_install():
    """Inspect namespaces an editable install only when its distribution is named like the package (it is not)."""
    shown = subprocess.run([sys.executable, "-c", NAMES_AS_REGISTERED], capture_output=True, text=True, check=True)
    assert shown.stdout.split("\n")[-2] == EVERY_NAME_FOUND


@pytest.mark.slow  # builds the wheel
def test_tasks_and_solvers_are_under_rebench_once_in_a_wheel_install(tmp_path):
    """Installed from the wheel, Inspect namespaces the package itself: the names must not become rebench/rebench/."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(tmp_path),
            str(REPOSITORY),
        ],
        check=True,
        capture_output=True,
    )
    [wheel] = tmp_path.glob("inspect_rebench-*.whl")
    site_packages = tmp_path / "site-packages"  # where Inspect recognises an installed package
    subprocess.run([sys.executable, "-m", "zipfile", "-e", str(wheel), str(site_packages)], check=True)
    # every environment's register listing ships with it (its task reads its version there)
    assert all((site_packages / "rebench" / name / "eval.yaml").is_file() for name in environment_names())
    code = f"import rebench; assert rebench.__file__.startswith({str(site_packages)!r})\n{NAMES_AS_REGISTERED}"
    shown = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(site_packages)},
    )
    assert shown.stdout.split("\n")[-2] == EVERY_NAME_FOUND


def test_registry_import_is_light():
    code = (
        "import time, sys, inspect_ai, inspect_ai.agent, inspect_ai.scorer, inspect_ai.solver, inspect_ai.util\n"
        "t = time.perf_counter(); import rebench._registry; elapsed = time.perf_counter() - t\n"
        "print(elapsed, 'torch' in sys.modules, 'numpy' in sys.modules)"
    )
    elapsed, torch_loaded, numpy_loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert float(elapsed) < 0.5
    assert torch_loaded == "False" and numpy_loaded == "False"


@pytest.mark.slow  # the `inspect` command in a subprocess, a whole eval
def test_inspect_cli_runs_a_registered_task_from_another_directory(tmp_path):
    inspect = Path(sys.executable).parent / "inspect"
    subprocess.run(
        [
            str(inspect),
            "eval",
            "rebench/optimize_kernel",
            "--model",
            "none",
            "--sandbox",
            "local",
            "-T",
            "scale=smoke",
            "--log-dir",
            str(tmp_path / "logs"),
            "--display",
            "none",
        ],
        cwd=tmp_path,
        check=True,
        capture_output=True,
        text=True,
        timeout=600,
    )
    [log_file] = (tmp_path / "logs").glob("*.eval")
    dump = subprocess.run([str(inspect), "log", "dump", str(log_file)], capture_output=True, text=True, check=True)
    log = json.loads(dump.stdout)
    assert log["eval"]["task_registry_name"] == "rebench/optimize_kernel"
    score = log["samples"][0]["scores"]["rebench_scorer"]
    assert [entry["label"] for entry in score["metadata"]["score_log"]] == ["start", "final"]
    assert score["metadata"]["valid"]
