"""Layer rules: the shared host package (`rebench_inspect/`) names no environment; what an environment needs from the
host is named in its spec and lives in its own folder. The host package's layers import downwards only (`spec` ←
`runtime` ← `tools` ← `cli`), without a cycle, and environments import only its public face (`rebench_inspect`).
The imports are read from the source (every `import` statement, also inside functions; not those under
`if TYPE_CHECKING:`), so a deferred import counts like any other."""

import ast
import re
from pathlib import Path

import pytest

import rebench_inspect
from rebench.environments import ENVIRONMENTS
from rebench_inspect.tools.images import add_environment_build_files

REPOSITORY = Path(__file__).resolve().parents[2]
HOST_PACKAGE = REPOSITORY / "rebench_inspect"
PACKAGES = {"rebench_inspect": HOST_PACKAGE, "rebench": REPOSITORY / "tasks"}
# Layers of the host package, lowest first: a module may import its own layer and the ones below. The audit's rules
# read score logs and transcripts; the report reads their verdicts.
LAYERS = ("spec", "runtime", "audit", "tools", "cli")
# What the core layers may import of the `rebench` package: the standard-library helpers staged programs share.
CORE_MAY_IMPORT = ("rebench.sandbox_lib",)
# Besides the public face, the audit's own package: its scanners register without Inspect Scout (tasks/_registry.py).
TASKS_MAY_IMPORT = ("rebench_inspect", "rebench_inspect.audit")


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


def module_name(path: Path) -> str:
    for package, root in PACKAGES.items():
        if path.is_relative_to(root):
            parts = [package, *path.relative_to(root).with_suffix("").parts]
            return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
    raise ValueError(path)


def _is_module(name: str) -> bool:
    package, *rest = name.split(".")
    if package not in PACKAGES:
        return False
    path = PACKAGES[package].joinpath(*rest)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _type_checking_only(tree: ast.Module) -> set[ast.AST]:
    hidden: set[ast.AST] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            hidden.update(child for statement in node.body for child in ast.walk(statement))
    return hidden


def imports_of(path: Path) -> set[str]:
    """The modules `path` imports (`from package import module` names the module), relative imports resolved."""
    tree = ast.parse(path.read_text())
    hidden = _type_checking_only(tree)
    package = module_name(path).split(".") if path.name == "__init__.py" else module_name(path).split(".")[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if node in hidden:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            source = ".".join([*base, *([node.module] if node.module else [])])
            submodules = {f"{source}.{alias.name}" for alias in node.names}
            found.update(name for name in submodules if _is_module(name))
            if not submodules <= found:
                found.add(source)
    return found


def layer_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "rebench_inspect" and len(parts) > 2 and parts[1] in LAYERS else None


def host_imports() -> dict[str, set[str]]:
    """Every module of the host package → the modules it imports."""
    return {module_name(path): imports_of(path) for path in sorted(HOST_PACKAGE.rglob("*.py"))}


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """`a imports b` wherever b lies in a higher layer than a, or a core module (spec, runtime) imports the
    `rebench` package beyond what staged programs share."""
    found = []
    for module, imported in sorted(graph.items()):
        layer = layer_of(module)
        if layer is None:
            continue
        for target in sorted(imported):
            target_layer = layer_of(target)
            if target_layer is not None and LAYERS.index(target_layer) > LAYERS.index(layer):
                found.append(f"{module} ({layer}) imports {target} ({target_layer})")
            if layer in ("spec", "runtime") and target.split(".")[0] == "rebench":
                if not target.startswith(CORE_MAY_IMPORT):
                    found.append(f"{module} ({layer}) imports the environments' package: {target}")
    return found


def import_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The cycles among the graph's own modules (one per strongly connected component of more than one module)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in graph[module]:
            if target not in graph:
                continue
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return cycles


def test_the_host_layers_import_downwards_only():
    assert layer_violations(host_imports()) == []


def test_the_host_package_has_no_import_cycle():
    assert import_cycles(host_imports()) == []


def test_environments_import_only_the_public_face():
    reaching_in = [
        f"{path.relative_to(REPOSITORY)} imports {module}"
        for path in sorted((REPOSITORY / "tasks").rglob("*.py"))
        for module in sorted(imports_of(path))
        if module.split(".")[0] == "rebench_inspect"
        and not any(
            module == allowed or (allowed != "rebench_inspect" and module.startswith(f"{allowed}."))
            for allowed in TASKS_MAY_IMPORT
        )
    ]
    assert reaching_in == [], "import these names from `rebench_inspect` (add them to its public face if missing)"


def test_the_public_face_names_what_it_loads():
    typed = {
        alias.name: (node.module or "").lstrip(".")
        for node in ast.walk(ast.parse((HOST_PACKAGE / "__init__.py").read_text()))
        if isinstance(node, ast.ImportFrom) and node.level == 1
        for alias in node.names
    }
    assert typed == rebench_inspect._LAZY
    assert set(rebench_inspect.__all__) == {"DISTRIBUTION", *rebench_inspect._LAZY}
    for name in rebench_inspect._LAZY:
        assert getattr(rebench_inspect, name) is not None
