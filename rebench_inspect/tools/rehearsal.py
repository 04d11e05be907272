"""The full-image build rehearsal: `rebench images rehearse ENV`, on a machine with no GPU and no image registry.

1. The build: `images.build_image(ENV, "full")` with a local stand-in for the Hugging Face hub (`hub_standin`), so the
   real download, conversion and preparation code runs inside the full image on tiny assets of the real formats. The
   environment image gets the tag `images.rehearsal_tag(ENV)`: its data are stand-ins, never the real image's.
2. The image check (`check_image`), without a GPU: the pinned versions are those of the requirement files and of
   docs/fidelity.md (each environment's `full_image.FIDELITY_PINS`); torch's CUDA libraries are there and load; the
   accounts, owners and modes are
   those the environment's Dockerfile gives at every scale (and those of the smoke image, where one is built here);
   the scoring program starts and, where it needs GPUs, refuses to run without them with a clear message.

A wheel the build must be given and this machine cannot have (flash-attn's, built for GPUs) is served as a stand-in
(`stand_in_wheel`) unless the rehearsal is given one, so the build's own install and version check of a given wheel
run too; the image's label names the stand-in.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import shlex
import subprocess
import tarfile
import tempfile
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.gpu_preflight import TORCH_CUDA
from ..runtime.layout import CONTAINER_HOME, CONTAINER_PROTECTED, CONTAINER_SCORING_SCRATCH
from ..runtime.sandbox import image_tag, sandbox_folder
from ..runtime.staging import ProgramPaths, prepare_command, scoring_command, staged_tree
from ..spec.environment import EnvironmentSpec, full_image_module
from .hub_standin import assets_for, serve_hub
from .images import base_tag, build_image, full_requirements, image_exists, takes_flash_attn_wheel

# A fixed port keeps the build argument HF_ENDPOINT constant, so the layer cache survives between rehearsals.
HUB_STANDIN_PORT = 8766
VENV = "/opt/venv"
LLM_FOUNDRY_VENV = "/opt/llm-foundry"
# Libraries without which torch cannot compute on a GPU; every one must load (the driver is not needed for that).
CORE_CUDA_LIBRARIES = ("libcudart", "libcublas", "libcudnn", "libnccl")
# A full-scale scoring program that needs GPUs says so in this sentence (sandbox_lib.program.NO_GPU).
GPU_REFUSAL = re.compile(r"needs \d+ GPU")


@dataclass
class CheckResult:
    problems: list[str] = field(default_factory=list)
    facts: dict[str, object] = field(default_factory=dict)


def requirement_pins(path: Path) -> dict[str, str]:
    """`name==version` lines of a requirement file (names normalised as pip does)."""
    pins = {}
    for line in path.read_text().splitlines():
        match = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*==\s*([^\s;#]+).*", line)
        if match:
            pins[re.sub(r"[-_.]+", "-", match.group(1)).lower()] = match.group(2)
    return pins


def expected_pins(environment: EnvironmentSpec) -> dict[str, dict[str, str]]:
    """Python environment → package → version the full image must hold: the requirement files' pins (the
    environment's override the base's, e.g. a torch of its own; they go to its `OWN_VENV` where it has one), then the
    versions docs/fidelity.md states that no requirement file pins (its `FIDELITY_PINS`)."""
    facts = full_image_module(environment)
    base, *own = full_requirements(environment)
    pins = {VENV: requirement_pins(base)}
    for path in own:
        pins.setdefault(getattr(facts, "OWN_VENV", VENV), {}).update(requirement_pins(path))
    for python, packages in getattr(facts, "FIDELITY_PINS", {}).items():
        pins.setdefault(python, {}).update(packages)
    return pins


def dockerfile_accounts(environment: EnvironmentSpec) -> set[str]:
    """The accounts the environment's Dockerfile and the base create (the same at every scale)."""
    text = (sandbox_folder(environment.name) / "Dockerfile").read_text()
    return {"root", "agent", *re.findall(r"useradd [^\n]*?(rebench-[a-z-]+)", text)}


def probe_image(tag: str) -> dict[str, object]:
    """Run image_probe.py in the image (no network, no GPU) and return its report."""
    probe = (Path(__file__).parent / "image_probe.py").read_text()
    done = subprocess.run(
        ["docker", "run", "--rm", "-i", "--network", "none", "--entrypoint", "python3", tag, "-"],
        input=probe,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the image probe failed in {tag} (exit {done.returncode}): {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def version_problems(report: dict, pins: dict[str, dict[str, str]]) -> list[str]:
    problems = []
    for python, packages in pins.items():
        found = (report.get("pythons") or {}).get(python)
        if not found or "error" in found:
            problems.append(f"{python}: no working Python ({(found or {}).get('error', 'missing')})")
            continue
        for name, wanted in packages.items():
            have = found["packages"].get(name)
            if have != wanted:
                problems.append(f"{python}: {name} is {have}, pinned {wanted}")
    return problems


def cuda_problems(report: dict, pins: dict[str, dict[str, str]]) -> list[str]:
    problems = []
    for python, packages in pins.items():
        torch_pin = packages.get("torch")
        found = (report.get("pythons") or {}).get(python) or {}
        if torch_pin is None or "torch" not in found:
            continue
        torch = found["torch"]
        wanted = TORCH_CUDA.get(torch_pin)
        if torch["cuda"] is None:
            problems.append(f"{python}: torch {torch_pin} is a CPU build (torch.version.cuda is None)")
        elif wanted and torch["cuda"] != wanted:
            problems.append(f"{python}: torch is built for CUDA {torch['cuda']}, expected {wanted}")
        libraries = torch["libraries"]
        for library in CORE_CUDA_LIBRARIES:
            if library not in libraries:
                problems.append(f"{python}: no {library} among torch's NVIDIA wheels")
            elif libraries[library] != "loads":
                problems.append(f"{python}: {library} {libraries[library]}")
    return problems


def security_problems(report: dict, environment: EnvironmentSpec) -> list[str]:
    problems = []
    accounts = report["accounts"]
    for name in sorted(dockerfile_accounts(environment)):
        if accounts.get(name) is None:
            problems.append(f"no account {name} (the Dockerfile creates it)")
    paths = report["paths"]
    if paths.get(CONTAINER_PROTECTED) != {"owner": "root", "mode": "0o700", "kind": "folder"}:
        problems.append(f"{CONTAINER_PROTECTED} is {paths.get(CONTAINER_PROTECTED)}, not root's with mode 700")
    if report["protected_readable_by_others"]:
        problems.append(f"files in {CONTAINER_PROTECTED} others can read: {report['protected_readable_by_others']}")
    workspace = paths.get(f"{CONTAINER_HOME}/workspace") or {}
    if workspace.get("owner") != "agent":
        problems.append(f"{CONTAINER_HOME}/workspace is {workspace or 'missing'}, not the agent's")
    if "compute" not in (report.get("nvidia_driver_capabilities") or ""):
        problems.append("NVIDIA_DRIVER_CAPABILITIES lacks compute: the NVIDIA runtime would not mount libcuda")
    return problems


def smoke_differences(full: dict, smoke: dict) -> list[str]:
    """Accounts and folder owners/modes that differ between the full and the smoke image (data may differ)."""
    problems = []
    for section in ("accounts", "paths"):
        for key in sorted(set(full[section]) | set(smoke[section])):
            if full[section].get(key) != smoke[section].get(key):
                problems.append(
                    f"{key}: {full[section].get(key)} in the full image, {smoke[section].get(key)} in smoke"
                )
    return problems


def scoring_gpus(environment: EnvironmentSpec) -> int:
    """The GPUs the environment's scoring program needs at full scale (its `GPUS_AT_FULL_SCALE`; none without)."""
    text = (environment.sandbox_dir / "score.py").read_text()
    declared = re.search(r"^GPUS_AT_FULL_SCALE = (\d+)$", text, re.MULTILINE)
    return int(declared.group(1)) if declared else 0


def _staged_archive(environment: EnvironmentSpec) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for relative, source in sorted(staged_tree(environment).items()):
            archive.add(source, arcname=relative)
    return buffer.getvalue()


def scoring_problems(tag: str, environment: EnvironmentSpec) -> tuple[list[str], dict[str, object]]:
    """Start the scoring program in the image as a task would (staged tree in, task setup first where it needs no GPU),
    without a GPU: a scoring program that needs GPUs must refuse with the sentence that says so (exit 2, no result);
    one that calls a host service must name the missing service; any other must give a verdict."""
    code = f"{CONTAINER_PROTECTED}/code"
    paths = ProgramPaths(
        python="python3", code_dir=code, workspace=f"{CONTAINER_HOME}/workspace", protected=CONTAINER_PROTECTED
    )
    needs_gpus = scoring_gpus(environment) > 0
    score, cwd = scoring_command(
        environment.at("full"),
        **paths,
        result="/tmp/result.json",
        run_as="agent",
        scratch=CONTAINER_SCORING_SCRATCH,
    )
    script = f"mkdir -p {code} && tar -x -C {code} && cd {shlex.quote(cwd)} || exit 8; "
    if not needs_gpus:
        setup, _ = prepare_command(environment.at("full"), **paths, setup=True)
        script += f"{shlex.join(setup)} >/tmp/setup.log 2>&1 || {{ cat /tmp/setup.log; exit 9; }}; "
    script += f'{shlex.join(score)}; echo "exit=$?"; cat /tmp/result.json 2>/dev/null || true'
    done = subprocess.run(
        ["docker", "run", "--rm", "-i", "--network", "none", tag, "sh", "-c", script],
        input=_staged_archive(environment),
        capture_output=True,
        timeout=900,
        check=False,
    )
    out, err = done.stdout.decode(errors="replace"), done.stderr.decode(errors="replace")
    exit_line = re.search(r"exit=(\d+)", out)
    facts: dict[str, object] = {
        "scoring_exit": int(exit_line.group(1)) if exit_line else None,
        "scoring_stderr": err[-600:],
    }
    if exit_line is None:
        return [f"the scoring program did not start (container exit {done.returncode}): {(out + err)[-1500:]}"], facts
    status = int(exit_line.group(1))
    if needs_gpus:
        if status != 2 or not GPU_REFUSAL.search(err):
            return [
                f"without a GPU the scoring program exited {status} without saying it needs GPUs: {err[-800:]}"
            ], facts
        return [], facts
    # A scoring program that calls a service the task opens on the host for each scoring run (a model proxy) cannot
    # give a verdict in a bare container: it must stop with the sentence that names the service.
    service = getattr(full_image_module(environment), "SCORING_HOST_SERVICE", None)
    if service is not None:
        if status != 2 or service not in err:
            return [
                f"without its host service the scoring program exited {status} without naming it: {err[-800:]}"
            ], facts
        return [], facts
    result = out[exit_line.end() :].strip()
    if status != 0 or not result.startswith("{"):
        return [f"the scoring program gave no verdict (exit {status}): {err[-800:]}"], facts
    facts["verdict"] = json.loads(result)
    return [], facts


def image_size_gb(tag: str) -> float:
    size = subprocess.run(
        ["docker", "image", "inspect", "--format", "{{.Size}}", tag], capture_output=True, text=True, check=True
    ).stdout
    return int(size) / 1e9


def check_image(tag: str, environment: EnvironmentSpec) -> CheckResult:
    """The image check without a GPU (module docstring, step 2)."""
    result = CheckResult()
    report = probe_image(tag)
    pins = expected_pins(environment)
    result.facts["pythons"] = report["pythons"]
    result.problems += version_problems(report, pins)
    result.problems += cuda_problems(report, pins)
    result.problems += security_problems(report, environment)
    smoke = image_tag(environment.name, "smoke")
    if image_exists(smoke):
        result.problems += smoke_differences(report, probe_image(smoke))
        result.facts["compared_with_smoke_image"] = True
    scoring, facts = scoring_problems(tag, environment)
    result.problems += scoring
    result.facts.update(facts)
    return result


@dataclass
class Rehearsal:
    tag: str
    build_s: float
    image_gb: float
    base_gb: float
    hub_requests: list[str]
    hub_misses: list[str]
    check: CheckResult


def stand_in_wheel(distribution: str, version: str, folder: Path) -> Path:
    """A pure-Python wheel of `distribution` at `version` whose module refuses to import, saying it is a stand-in:
    what pip installs and importlib.metadata reports are the real wheel's, and no code can mistake it for the real
    library (libraries that probe for it, as llm-foundry does for flash-attn, see it as absent)."""
    module = distribution.replace("-", "_")
    info = f"{module}-{version}.dist-info"
    files = {
        f"{module}/__init__.py": f'raise ImportError("this {distribution} {version} is a stand-in wheel of the '
        f'full-image build rehearsal, not the library")\n',
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n"
        "Summary: stand-in for rebench's full-image build rehearsal\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: rebench\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }

    def record_line(name: str, text: str) -> str:
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        return f"{name},sha256={digest},{len(text.encode())}"

    files[f"{info}/RECORD"] = "".join(f"{record_line(n, t)}\n" for n, t in files.items()) + f"{info}/RECORD,,\n"
    wheel = folder / f"{module}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return wheel


def rehearse(
    environment: EnvironmentSpec, *, base_image: str | None = None, flash_attn_wheel: str | None = None
) -> Rehearsal:
    """Build the environment's full image against the hub stand-in (and, unless given one, a stand-in flash-attn
    wheel where the image takes one), then check it."""
    started = time.monotonic()
    with (
        serve_hub(assets_for(environment), port=HUB_STANDIN_PORT) as (endpoint, hub),
        tempfile.TemporaryDirectory(prefix="rebench-stand-in-wheel-") as folder,
    ):
        if flash_attn_wheel is None and takes_flash_attn_wheel(environment):
            pinned = next(pins["flash-attn"] for pins in expected_pins(environment).values() if "flash-attn" in pins)
            flash_attn_wheel = str(stand_in_wheel("flash-attn", pinned, Path(folder)))
        tag = build_image(
            environment, "full", base_image=base_image, hub_endpoint=endpoint, flash_attn_wheel=flash_attn_wheel
        )
    build_s = time.monotonic() - started
    return Rehearsal(
        tag=tag,
        build_s=build_s,
        image_gb=image_size_gb(tag),
        base_gb=image_size_gb(base_tag("full")),
        hub_requests=list(hub.served),
        hub_misses=list(hub.missed),
        check=check_image(tag, environment),
    )
