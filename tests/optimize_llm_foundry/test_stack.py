"""Where the LLM Foundry stack is found (scoring/stack.py and the agent's env.sh, one rule) and the installer's
cheap path; no stack venv needed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TASK = ROOT / "tasks" / "optimize_llm_foundry"
INSTALLER = ROOT / "sandboxes" / "optimize_llm_foundry" / "install_llm_foundry.sh"
IMAGE_VENV = Path("/opt/llm-foundry")


def fake_venv(folder: Path, with_foundry: bool = True) -> Path:
    (folder / "bin").mkdir(parents=True)
    (folder / "bin" / "python").symlink_to(sys.executable)
    if with_foundry:
        (folder / "lib" / "python3.11" / "site-packages" / "llm_foundry-0.11.0.dist-info").mkdir(parents=True)
    return folder


def run_stack(env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k != "REBENCH_LLM_FOUNDRY_VENV"}
    return subprocess.run(
        [sys.executable, str(TASK / "sandbox" / "stack.py")], capture_output=True, text=True, env=base | env
    )


@pytest.mark.skipif(IMAGE_VENV.exists(), reason="this machine has the image's venv, which the home fallback yields to")
def test_stack_takes_the_variable_else_the_home_venv_and_says_how_to_install(tmp_path):
    given = fake_venv(tmp_path / "given")
    found = run_stack({"REBENCH_LLM_FOUNDRY_VENV": str(given), "HOME": str(tmp_path / "home")})
    assert found.returncode == 0 and f"{given} (llm-foundry 0.11.0)" in found.stdout

    missing = run_stack({"HOME": str(tmp_path / "home")})
    home_venv = tmp_path / "home" / ".local" / "share" / "rebench" / "llm-foundry-venv"
    assert missing.returncode == 1
    assert f"bash sandboxes/optimize_llm_foundry/install_llm_foundry.sh {home_venv} smoke" in missing.stdout

    fake_venv(home_venv, with_foundry=False)  # a venv whose install never finished
    assert "has no llm-foundry" in run_stack({"HOME": str(tmp_path / "home")}).stdout


def source_env(workspace: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    script = 'source ../env.sh && echo "$PATH" && echo "$BASE_MODEL" && echo "$VIRTUAL_ENV"'
    base = {k: v for k, v in os.environ.items() if k != "REBENCH_LLM_FOUNDRY_VENV"}
    return subprocess.run(
        ["bash", "-euc", script], cwd=workspace / "solution", capture_output=True, text=True, env=base | env
    )


def test_env_sh_activates_the_venv_and_finds_the_base_model_where_the_workspace_was_copied(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    workspace = tmp_path / "copied" / "workspace"
    (workspace / "solution").mkdir(parents=True)
    shutil.copy(TASK / "sandbox" / "env.sh", workspace / "env.sh")
    sourced = source_env(workspace, {"REBENCH_LLM_FOUNDRY_VENV": str(venv)})
    assert sourced.returncode == 0, sourced.stderr
    path, base_model, virtual_env = sourced.stdout.splitlines()
    assert path.split(":")[0] == f"{venv}/bin" and virtual_env == str(venv)
    assert base_model == str(workspace / "base_model")

    if not IMAGE_VENV.exists():  # without a venv, finetune.sh stops at `source ../env.sh` with the reason
        failed = source_env(workspace, {"HOME": str(tmp_path / "home")})
        assert failed.returncode != 0 and "no LLM Foundry environment at" in failed.stderr


def test_installer_is_a_no_op_when_the_venv_holds_the_same_requirements(tmp_path):
    venv = fake_venv(tmp_path / "venv")
    requirements = (INSTALLER.parent / "requirements.txt").read_text()
    (venv / "rebench-stack.txt").write_text(requirements + "# scale: smoke\n")
    done = subprocess.run(["bash", str(INSTALLER), str(venv), "smoke"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0 and "already installed" in done.stdout
    wrong = subprocess.run(["bash", str(INSTALLER), str(venv), "medium"], capture_output=True, text=True, timeout=30)
    assert wrong.returncode == 2 and "usage" in wrong.stderr
