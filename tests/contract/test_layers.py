"""Layer rules: the shared host package (`rebench_inspect/`) names no environment; what an environment needs from the
host is named in its spec and lives in its own folder."""

import re
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS
from rebench_inspect.images import add_environment_build_files

HOST_PACKAGE = Path(__file__).resolve().parents[2] / "rebench_inspect"


def host_files() -> list[Path]:
    return [path for path in sorted(HOST_PACKAGE.rglob("*")) if path.is_file() and "__pycache__" not in path.parts]


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_the_host_package_names_no_environment(name):
    word = re.compile(rf"\b{re.escape(name)}\b")
    naming = [str(path.relative_to(HOST_PACKAGE)) for path in host_files() if word.search(path.read_text())]
    assert not naming, f"{name} is named in rebench_inspect/: {naming} (environment code belongs in tasks/{name}/)"


@pytest.mark.parametrize("name", sorted(name for name, spec in ENVIRONMENTS.items() if spec.build_files))
def test_build_files_name_a_function_of_the_environment(name):
    module, _, function = ENVIRONMENTS[name].build_files.partition(":")
    assert module.startswith(f"rebench.{name}."), "an environment's build step lives in its own folder"
    imported = __import__(module, fromlist=[function])
    assert callable(getattr(imported, function))


def served_marker(served: Path) -> None:
    (served / "marker.txt").write_text("served")


def test_the_image_build_serves_what_the_spec_names(tmp_path):
    toy = next(iter(ENVIRONMENTS.values())).model_copy(
        update={"build_files": "tests.contract.test_layers:served_marker"}
    )
    add_environment_build_files(toy, tmp_path)
    assert (tmp_path / "marker.txt").read_text() == "served"
    add_environment_build_files(toy.model_copy(update={"build_files": None}), tmp_path / "nothing")
    assert not (tmp_path / "nothing").exists()
