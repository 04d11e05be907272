"""Fixtures of the restricted_mlm tests: smoke assets (cached), the reference model (cached), the scoring program
run as the host runs it (docs/CONTRACT.md), and the trusted checker loaded as the scorer loads it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rebench.restricted_mlm.task import ENVIRONMENT
from rebench.sandbox_lib.paths import cache_root
from rebench_inspect.runtime.staging import copy_workspace
from tests import scoring_program as shared

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "restricted_mlm"


def score_workspace(workspace: Path, protected: Path, **kwargs) -> dict:
    """Run score.py as the host would; assert it ran (exit 0, one JSON object) and return the result."""
    return shared.scoring_result(ENVIRONMENT, workspace, protected, **kwargs)


def cache_dir() -> Path:
    return cache_root() / "restricted_mlm"


@pytest.fixture(scope="session")
def smoke_assets(tmp_path_factory) -> dict:
    """The starting workspace plus prepared smoke assets (built once, then from $REBENCH_CACHE_DIR)."""
    from rebench.restricted_mlm.sandbox import prepare

    root = tmp_path_factory.mktemp("mlm-assets")
    copy_workspace(ENVIRONMENT.at("full"), root / "workspace")
    prepare.PREPARATION.prepare("smoke", root / "workspace", root / "protected", setup=True)
    return {"workspace": root / "workspace", "protected": root / "protected", "prepare": prepare}


@pytest.fixture
def scoring_dirs(smoke_assets, tmp_path) -> tuple[Path, Path]:
    """A fresh copy of the prepared workspace and protected directory."""
    workspace, protected = tmp_path / "workspace", tmp_path / "protected"
    shutil.copytree(smoke_assets["workspace"], workspace)
    shutil.copytree(smoke_assets["protected"], protected)
    return workspace, protected


@pytest.fixture(scope="session")
def reference_solution(smoke_assets, tmp_path_factory) -> Path:
    """solution/ folder produced by reference/solve.sh at smoke scale (cached by the reference code and assets)."""
    # The reference is trained from the training tokens and settings only.
    digest = hashlib.sha256()
    for name in ("info.json", "train.bin"):
        digest.update((smoke_assets["workspace"] / "data" / name).read_bytes())
    for path in sorted(p for p in (TASK / "reference").rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(path.name.encode() + path.read_bytes())
    cached = cache_dir() / f"reference-{digest.hexdigest()[:16]}"
    if not (cached / "reference_model.pt").exists():
        workspace = tmp_path_factory.mktemp("reference") / "workspace"
        shutil.copytree(smoke_assets["workspace"], workspace)
        shutil.copytree(TASK / "reference", workspace, dirs_exist_ok=True)
        env = {**os.environ, "REBENCH_SCALE": "smoke", "PYTHON": sys.executable}
        completed = subprocess.run(
            ["bash", "solve.sh"],
            check=False,
            cwd=workspace,
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
        staging = cached.with_name(cached.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        shutil.copytree(
            workspace / "solution",
            staging,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
        shutil.rmtree(cached, ignore_errors=True)
        os.replace(staging, cached)
    return cached
