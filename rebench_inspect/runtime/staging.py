"""Which repository files go into the sandbox, for scoring and for preparation, and how they run (docs/CONTRACT.md).

The staged tree is a slice of the `rebench` package: `rebench/__init__.py`, the declared libraries
(`rebench/sandbox_lib/`, `rebench/lm_common/`), `rebench/<env>/__init__.py` and `rebench/<env>/sandbox/`. Its
programs run as modules (`python -m rebench.<env>.sandbox.score`) from the folder holding it, so they import
`rebench.sandbox_lib` and their siblings exactly as on the host. The import path is the working directory, never
`PYTHONPATH`: the scorer's environment reaches the agent's demoted processes (`sandbox_lib.run_untrusted`).
"""

from collections.abc import Sequence
from importlib.resources import files
from pathlib import Path
from typing import TypedDict

from rebench.sandbox_lib.modules import module_command

from ..spec.environment import EnvironmentSpec, ResolvedEnvironment

_SKIPPED_PARTS = {"__pycache__"}
PACKAGE = "rebench"


def _tree(root: Path, prefix: str) -> dict[str, Path]:
    return {
        f"{prefix}{path.relative_to(root).as_posix()}": path
        for path in sorted(root.rglob("*"))
        if path.is_file() and not _SKIPPED_PARTS.intersection(path.parts) and path.suffix != ".pyc"
    }


def _package_root() -> Path:
    return Path(str(files(PACKAGE)))


def _libraries_tree(libraries: Sequence[str]) -> dict[str, Path]:
    package_root = _package_root()
    staged = {f"{PACKAGE}/__init__.py": package_root / "__init__.py"}
    for library in libraries:
        staged.update(_tree(package_root / library, f"{PACKAGE}/{library}/"))
    return staged


def staged_tree(environment: EnvironmentSpec) -> dict[str, Path]:
    """Relative destination path → source file: the environment's `sandbox/` and its declared libraries, wholesale,
    as the package slice the module docstring describes; the same tree for the scoring program and for preparation."""
    staged = _libraries_tree(environment.sandbox_libraries)
    staged[f"{PACKAGE}/{environment.name}/__init__.py"] = environment.folder / "__init__.py"
    staged.update(_tree(environment.sandbox_dir, f"{PACKAGE}/{environment.name}/sandbox/"))
    return staged


def sandbox_lib_tree() -> dict[str, Path]:
    """sandbox_lib alone, as a package slice: what copies the workspace into the scoring service
    (scoring.copy_submission)."""
    return _libraries_tree(["sandbox_lib"])


def sandbox_module(environment: EnvironmentSpec, entry: str) -> str:
    """The module name of a staged program, e.g. `rebench.<environment>.sandbox.score`."""
    return f"{PACKAGE}.{environment.name}.sandbox.{entry}"


def sandbox_command(
    module: str, arguments: Sequence[str], *, python: str, code_dir: str | Path
) -> tuple[list[str], str]:
    """How the host runs a staged program: `(argv, cwd)`, the module run from the folder holding the staged tree,
    by the builder the sandbox's own programs use (`rebench.sandbox_lib.modules`)."""
    return module_command(module, arguments, python=python, code_dir=code_dir)


def _copy(files: dict[str, Path], destination: Path) -> Path:
    for relative, source in files.items():
        target = destination / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    return destination


def stage_tree(environment: EnvironmentSpec, destination: Path) -> Path:
    """Copy the staged tree into a host directory (the CLI and tests); returns the destination."""
    return _copy(staged_tree(environment), destination)


def workspace_files(environment: ResolvedEnvironment) -> dict[str, Path]:
    """The starting workspace at the environment's scale: relative path → source file (`agent/workspace/` plus the
    declared agent copies, the scale's variant of each)."""
    spec = environment.spec
    files = _tree(spec.workspace_dir, "") if spec.workspace_dir.exists() else {}
    files.update({relative: spec.folder / source for relative, source in environment.agent_copies.items()})
    return files


def copy_workspace(environment: ResolvedEnvironment, destination: Path) -> Path:
    """Lay out the starting workspace in a host directory (tests, benchmarks); returns the destination."""
    return _copy(workspace_files(environment), destination)


def reference_files(environment: EnvironmentSpec) -> dict[str, Path]:
    return _tree(environment.reference_dir, "")


class ProgramPaths(TypedDict):
    """Where a staged program runs, as `scoring_command` and `prepare_command` take it: the interpreter, the staged
    tree, the agent's workspace and the root-only protected folder."""

    python: str
    code_dir: str | Path
    workspace: str | Path
    protected: str | Path


def scoring_command(
    environment: ResolvedEnvironment,
    *,
    python: str,
    code_dir: str | Path,
    workspace: str | Path,
    protected: str | Path,
    result: str | Path,
    run_as: str | None = None,
    scratch: str | None = None,
) -> tuple[list[str], str]:
    """The scoring program's `(argv, cwd)` (docs/CONTRACT.md), the same for the task, the CLI, tests and benchmarks:
    the host's time limit and the spec's ignore list travel with it, and in a container the root-only folder for its
    temporary files (`SandboxLayout.scoring_scratch`)."""
    arguments = [
        "--workspace",
        str(workspace),
        "--protected",
        str(protected),
        "--scale",
        environment.scale,
        "--result",
        str(result),
        "--time-limit",
        str(environment.scoring_timeout_s),
    ]
    for pattern in environment.spec.workspace_ignore:
        arguments += ["--ignore", pattern]
    if scratch:
        arguments += ["--scratch", scratch]
    if run_as:
        arguments += ["--run-as", run_as]
        for user in environment.spec.agent_extra_users:
            arguments += ["--agent-extra-user", user]
    return sandbox_command(sandbox_module(environment.spec, "score"), arguments, python=python, code_dir=code_dir)


def prepare_command(
    environment: ResolvedEnvironment,
    *,
    python: str,
    code_dir: str | Path,
    workspace: str | Path,
    protected: str | Path,
    setup: bool,
) -> tuple[list[str], str]:
    """`sandbox/prepare.py`'s `(argv, cwd)` (`code_dir` holds the staged tree). `setup`: task setup, where full-scale
    assets must come from the image."""
    arguments = ["--scale", environment.scale, "--workspace", str(workspace), "--protected", str(protected)]
    if setup:
        arguments.append("--setup")
    return sandbox_command(sandbox_module(environment.spec, "prepare"), arguments, python=python, code_dir=code_dir)
