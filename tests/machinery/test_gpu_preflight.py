"""`rebench preflight ENV` on a GPU machine (rebench_inspect/runtime/gpu_preflight.py): driver, GPU count and memory, and the
host's CPUs and memory, against the environment's resources, read from a fake `nvidia-smi` put first on PATH."""

import os
import stat

import pytest

from rebench.environments import ENVIRONMENTS
from rebench_inspect.cli import main
from rebench_inspect.runtime import gpu_preflight

H100 = "NVIDIA H100 80GB HBM3, 81559, 580.95.05"


@pytest.fixture
def fake_gpus(tmp_path, monkeypatch):
    """fake_gpus(lines): nvidia-smi prints these CSV lines (name, MiB, driver) for its --query-gpu call."""
    monkeypatch.setattr(gpu_preflight.os, "cpu_count", lambda: 256)
    monkeypatch.setattr(gpu_preflight, "host_memory_gb", lambda: 2000.0)

    def install(lines: list[str] | None) -> None:
        if lines is None:
            monkeypatch.setenv("PATH", str(tmp_path / "empty"))
            return
        script = tmp_path / "bin" / "nvidia-smi"
        script.parent.mkdir(exist_ok=True)
        query = "*--query-gpu=name,memory.total,driver_version*"  # any other call fails, as a broken driver's would
        body = "\n".join(lines)
        script.write_text(f'#!/bin/sh\ncase "$*" in {query}) cat <<EOF\n{body}\nEOF\n;; *) exit 9;; esac\n')
        script.chmod(script.stat().st_mode | stat.S_IEXEC)
        monkeypatch.setenv("PATH", f"{script.parent}{os.pathsep}{os.environ['PATH']}")

    return install


def test_enough_h100s_with_a_new_driver_pass(fake_gpus):
    fake_gpus([H100] * 8)
    for name, environment in ENVIRONMENTS.items():
        assert gpu_preflight.gpu_problems(environment) == [], name


def test_too_few_gpus_are_counted(fake_gpus):
    fake_gpus([H100] * 2)
    [problem] = gpu_preflight.gpu_problems(ENVIRONMENTS["optimize_llm_foundry"])
    assert problem == "optimize_llm_foundry needs 4 GPU(s) per sample; nvidia-smi lists 2"


def test_a_machine_without_a_driver_is_told_so(fake_gpus):
    fake_gpus(None)
    [problem] = gpu_preflight.gpu_problems(ENVIRONMENTS["fix_embedding"])
    assert "no nvidia-smi on PATH" in problem


def test_a_driver_too_old_for_the_images_cuda_is_named_with_the_minimum(fake_gpus):
    fake_gpus(["NVIDIA H100 80GB HBM3, 81559, 550.54.15"])
    [problem] = gpu_preflight.gpu_problems(ENVIRONMENTS["fix_embedding"])
    assert "550.54.15 is older than 580.65.06" in problem
    # optimize_kernel's image has only torch 2.3.1 (CUDA 12.1): the same driver runs it.
    assert gpu_preflight.gpu_problems(ENVIRONMENTS["optimize_kernel"]) == []


def test_gpus_with_less_memory_than_the_measured_kind_are_not_counted(fake_gpus):
    fake_gpus(["NVIDIA A100-SXM4-40GB, 40960, 580.95.05"] * 2)
    [problem] = gpu_preflight.gpu_problems(ENVIRONMENTS["restricted_mlm"])
    assert "measured on 2× H100 80GB" in problem and "0 GPU(s) here have 80 GB or more" in problem


def test_the_hosts_cpus_and_memory_are_checked_against_the_container_limits(fake_gpus, monkeypatch):
    fake_gpus([H100])
    monkeypatch.setattr(gpu_preflight.os, "cpu_count", lambda: 8)
    monkeypatch.setattr(gpu_preflight, "host_memory_gb", lambda: 64.0)
    problems = gpu_preflight.gpu_problems(ENVIRONMENTS["optimize_kernel"])
    assert problems == [
        "optimize_kernel gives its container 13 CPUs; this machine has 8",
        "optimize_kernel gives its container 100 GB of memory; this machine has 64",
    ]


def test_rebench_preflight_reports_the_gpu_problems_and_fails(fake_gpus, monkeypatch, capsys):
    fake_gpus(["NVIDIA H100 80GB HBM3, 81559, 535.0"])
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")  # no engine: that problem comes first
    assert main(["preflight", "fix_embedding"]) == 1
    out = capsys.readouterr().out
    assert "no Docker engine is reachable" in out
    assert "535.0 is older than 580.65.06" in out


def test_host_memory_is_read_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24576000 kB\nMemFree:  1 kB\n")
    assert gpu_preflight.host_memory_gb(meminfo) == pytest.approx(25.17, abs=0.01)
