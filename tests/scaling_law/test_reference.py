"""The reference solution: a real capped sweep and fit through the agent's launcher, scoring clearly above the
starting answer at smoke scale (its answer is cached by the code it depends on, so reruns take seconds)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rebench.sandbox_lib.paths import cache_root
from rebench.scaling_law.task import ENVIRONMENT

from .conftest import TASK, score_answer

# Slow tier (`pytest -m slow`, run by CI): the reference sweep.
pytestmark = pytest.mark.slow


def cache_file() -> Path:
    digest = hashlib.sha256()
    sources = [
        *sorted((TASK / "reference").iterdir()),
        *sorted((TASK / "sandbox").glob("*.py")),
    ]
    sources += [TASK.parent / "lm_common" / name for name in ("model.py", "tokens.py", "corpus.py")]
    for path in sources:
        digest.update(path.name.encode() + path.read_bytes())
    return cache_root() / "scaling_law" / f"reference-answer-{digest.hexdigest()[:16]}.json"


@pytest.fixture(scope="module")
def reference_answer(prepared, tmp_path_factory) -> dict:
    cached = cache_file()
    if not cached.exists():
        workspace = tmp_path_factory.mktemp("reference") / "workspace"
        shutil.copytree(prepared["workspace"], workspace, symlinks=True)
        for path in (TASK / "reference").iterdir():
            shutil.copy2(path, workspace / path.name)
        completed = subprocess.run(
            ["bash", "solve.sh"],
            cwd=workspace,
            env={**os.environ, "PYTHON": sys.executable},
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-2000:]
        assert len(list((workspace / "runs").glob("ref_*.json"))) >= 9  # it really ran a sweep
        cached.parent.mkdir(parents=True, exist_ok=True)
        cached.write_text((workspace / "answer.json").read_text())
    return json.loads(cached.read_text())


def test_reference_scores_clearly_above_the_default(reference_answer, dirs):
    workspace, protected = dirs
    default = score_answer(workspace, protected, (workspace / "answer.json").read_text())
    reference = score_answer(workspace, protected, reference_answer)
    assert default["valid"] and reference["valid"], (default, reference)
    assert reference["raw"] > default["raw"] + 0.2
    assert reference["raw"] == pytest.approx(ENVIRONMENT.anchors["smoke"].reference, abs=0.1)


def test_reference_never_reads_the_ground_truth():
    for path in (TASK / "reference").iterdir():
        assert "ground_truth" not in path.read_text()
