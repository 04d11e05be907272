"""Build an environment's image for a scale, without any container registry: `rebench images build ENV --scale S`.

Two layers of images, tagged by scale: a shared base (`ghcr.io/rebench/base:<version>-<scale>`, Python + torch) and a
thin image per environment on top (its requirements, and its prepared assets in /protected).

- The base's parent is a build argument, by default a Debian made with debootstrap and `docker import`
  (`rebench/debian:bookworm`) at both scales, so a build needs Debian's and PyPI's mirrors only, no image registry.
  A user may name another parent (`--base-image`, e.g. a CUDA image from a registry they reach).
- Full scale takes the CUDA user-space libraries from the NVIDIA wheels on PyPI that PyTorch's CUDA build depends on;
  the NVIDIA container runtime adds the driver when a container starts. Those wheels are GBs: they are downloaded once
  on the host into a wheel cache (`wheel_cache_dir`) and served to every build from there.
- During a build this module serves a few files on loopback (`BUILD_FILES`): the host's CA bundle (pip and curl
  behind a TLS-intercepting proxy), local wheels (the CPU torch wheel for smoke, the wheel cache for full), the staged
  tree (the environment's `sandbox/`, where `prepare.py` lives, with its libraries), and whatever the environment's
  `build_files` function adds (e.g. a toolchain from the build host). Builds use the host network (`--network host`)
  to reach it; `rebench-build-run` (in the base) fetches them into a temporary folder for one RUN, so no layer keeps
  the CA or the preparation code.
- At smoke scale the preparation runs once per machine: the build prepares on the host first (into the host's cache of
  prepared assets, which the host's evals and tests use too, or finding them there) and serves that cache entry
  (`prepared.tar`); `rebench-prepare` puts it in the image's cache, where the preparation finds it instead of
  building the same assets again.
- A rehearsal (`rehearsal.py`) passes `hub_endpoint`: preparation then downloads from a local stand-in for the Hugging
  Face hub instead of the hub, and the environment image gets a tag of its own (`rehearsal_tag`), never the real one.
"""

import contextlib
import functools
import glob
import hashlib
import http.server
import importlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

from rebench.sandbox_lib.cache import is_complete
from rebench.sandbox_lib.preparation import Preparation, cache_entry

from ..runtime.sandbox import IMAGE_REGISTRY, IMAGE_VERSION, image_tag, sandbox_folder
from ..runtime.staging import prepare_command, stage_tree, staged_tree
from ..spec.environment import EnvironmentSpec, Scale

DEBIAN_PARENT = "rebench/debian:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# A fixed port keeps BUILD_FILES constant, so Docker's layer cache survives between builds.
BUILD_FILES_PORT = int(os.environ.get("REBENCH_BUILD_FILES_PORT", "8765"))
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
REHEARSAL_LABEL = "rebench.rehearsal"
FLASH_ATTN_LABEL = "rebench.flash-attn-wheel"


def base_tag(scale: Scale) -> str:
    return f"{IMAGE_REGISTRY}/base:{IMAGE_VERSION}-{scale}"


def _docker(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], check=True, **kwargs)


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode == 0


def rehearsal_tag(environment: str) -> str:
    """A rehearsal's environment image: built with stand-in downloads, so never under the real image's tag."""
    return f"{image_tag(environment, 'full')}-rehearsal"


def wheel_cache_dir() -> Path:
    return Path(os.environ.get("REBENCH_WHEEL_CACHE") or Path.home() / ".cache" / "rebench-wheels")


def ensure_debian_parent() -> None:
    """A minimal Debian bookworm image from Debian's own packages (debootstrap, then `docker import`)."""
    if image_exists(DEBIAN_PARENT):
        return
    if shutil.which("debootstrap") is None:
        raise RuntimeError(
            "debootstrap is missing: `apt-get install debootstrap` (or `bash sandboxes/engine.sh install`)"
        )
    with tempfile.TemporaryDirectory(prefix="rebench-rootfs-") as rootfs:
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", rootfs, DEBIAN_MIRROR], check=True)
        archive = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        _docker("import", "-", DEBIAN_PARENT, stdin=archive.stdout)
        if archive.wait() != 0:
            raise RuntimeError("could not archive the debootstrap root file system")


def local_wheels(scale: Scale) -> list[Path]:
    """Smoke images take torch's CPU wheel from the host (PyPI's Linux torch is the multi-GB CUDA build)."""
    if scale != "smoke":
        return []
    folders = [folder for folder in os.environ.get("PIP_FIND_LINKS", "/opt/wheels").split() if Path(folder).is_dir()]
    wheels = [Path(path) for folder in folders for path in glob.glob(f"{folder}/torch-2.13.0+cpu-*.whl")]
    if not wheels:
        raise RuntimeError(
            "no CPU wheel of torch 2.13.0 found (looked in $PIP_FIND_LINKS or /opt/wheels): "
            "`pip download --no-deps -d /opt/wheels torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu`"
        )
    return wheels


def full_requirements(environment: EnvironmentSpec) -> list[Path]:
    """The requirement files a full build installs with pip into the images' Python (the base's and the
    environment's; flash-attn is not among them: `llm-foundry`'s build takes it as a wheel file)."""
    files = [sandbox_folder("base") / "requirements.txt", sandbox_folder(environment.name) / "requirements.txt"]
    return [path for path in files if path.is_file()]


def fill_wheel_cache(requirements: list[Path], cache: Path) -> None:
    """Download the wheels of `requirements` (with their dependencies, the NVIDIA CUDA wheels among them) into `cache`
    once; later builds find them there. One download per file, as each is installed in a layer of its own (the
    environment's may replace the base's torch). The host's Python must be the image's (3.11 on the Debian base) for
    the cache to match: where it is not, the build's pip downloads what it misses from the index itself."""
    cache.mkdir(parents=True, exist_ok=True)
    for requirement in requirements:
        command = [sys.executable, "-m", "pip", "download", "--progress-bar", "off", "--dest", str(cache)]
        # A space overrides configured find-links: they may hold a CPU torch, which `torch==X` would match (X+cpu).
        subprocess.run([*command, "-r", str(requirement)], check=True, env={**os.environ, "PIP_FIND_LINKS": " "})


def add_environment_build_files(environment: EnvironmentSpec, served: Path) -> None:
    """Call the function the spec names in `build_files` ("module:function") with the served folder."""
    if environment.build_files is None:
        return
    module, _, function = environment.build_files.partition(":")
    getattr(importlib.import_module(module), function)(served)


def digest(parts: list[str] | list[bytes]) -> str:
    """A short content key for a build argument that must change when what the build is served changes."""
    hasher = hashlib.sha256()
    for part in parts:
        hasher.update(part.encode() if isinstance(part, str) else part)
        hasher.update(b"\0")
    return hasher.hexdigest()[:16]


def _prepare_archive(environment: EnvironmentSpec) -> bytes | None:
    if environment.prepare_script is None:
        return None
    files = staged_tree(environment)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for relative, source in sorted(files.items()):
            archive.add(source, arcname=relative)
    return buffer.getvalue()


def host_prepared_entry(environment: EnvironmentSpec) -> Path | None:
    """The host cache's entry of the environment's smoke assets, prepared on the host first where it is missing; None
    where its preparation keeps no cache entry, or fails on the host (the build then prepares in the image, and says
    why here)."""
    if environment.prepare_script is None:
        return None
    with tempfile.TemporaryDirectory(prefix="rebench-image-prepare-") as tmp:
        root = Path(tmp)
        argv, cwd = prepare_command(
            environment.at("smoke"),
            python=sys.executable,
            code_dir=stage_tree(environment, root / "code"),
            workspace=root / "workspace",
            protected=root / "protected",
            setup=False,
        )
        completed = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
        if completed.returncode != 0:
            print(f"preparing {environment.name} on the host failed; the image build prepares it instead:")
            print(completed.stderr[-2000:])
            return None
        marker = Preparation.marker(root / "protected")
    if marker is None or marker.get("scale") != "smoke":  # a preparation that keeps no cache entry
        return None
    entry = cache_entry(environment.name, "smoke", marker["key"])
    return entry if is_complete(entry) else None


def _entry_archive(entry: Path) -> bytes:
    """The cache entry as a tar archive of its path below the cache root (`<environment>/smoke-<key>`)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        archive.add(entry, arcname=f"{entry.parent.name}/{entry.name}")
    return buffer.getvalue()


@contextlib.contextmanager
def served_build_files(served: Path) -> Iterator[str]:
    """Serve a folder on loopback for the duration of a build; yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(served))
    server = _BuildFilesServer(("127.0.0.1", BUILD_FILES_PORT), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


class _BuildFilesServer(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address) -> None:  # type: ignore[no-untyped-def]
        # `rebench-prepare` asks whether prepare.tar exists and hangs up without reading it: not an error.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


def takes_flash_attn_wheel(environment: EnvironmentSpec) -> bool:
    """Whether the environment's image build takes flash-attn's wheel (`--flash-attn-wheel`)."""
    return "ARG FLASH_ATTN_WHEEL" in (sandbox_folder(environment.name) / "Dockerfile").read_text()


def build_image(
    environment: EnvironmentSpec,
    scale: Scale,
    *,
    ca_bundle: str | None = DEFAULT_CA_BUNDLE,
    base_image: str | None = None,
    hub_endpoint: str | None = None,
    flash_attn_wheel: str | None = None,
) -> str:
    """Build the base (if missing) and the environment's image for `scale`; returns the environment image's tag.

    `base_image`: the base's parent (default: the debootstrap Debian). `hub_endpoint`: a rehearsal's stand-in for the
    Hugging Face hub (preparation downloads from it; the image is tagged `rehearsal_tag`). `flash_attn_wheel`: for
    LLM Foundry's stack at full scale, flash-attn's prebuilt wheel (a file, served to the build; a URL; or "none")."""
    if base_image is None:
        ensure_debian_parent()
    wheels = local_wheels(scale)
    if scale == "full":
        fill_wheel_cache(full_requirements(environment), wheel_cache_dir())
        wheels = sorted(wheel_cache_dir().iterdir())
    # The base's layers change with its wheels only (an environment's flash-attn wheel is not among them).
    base_wheels_digest = digest(sorted(wheel.name for wheel in wheels))
    with tempfile.TemporaryDirectory(prefix="rebench-build-") as tmp:
        served = Path(tmp) / "served"
        (served / "wheels").mkdir(parents=True)
        # Only for an image whose Dockerfile takes it: one command may build several environments.
        flash_attn = (flash_attn_wheel or "") if takes_flash_attn_wheel(environment) else ""
        if flash_attn and Path(flash_attn).is_file():
            wheels.append(Path(flash_attn))
            flash_attn = Path(flash_attn).name
        for wheel in wheels:  # links, not copies: the full wheels are GBs (the server follows them)
            (served / "wheels" / wheel.name).symlink_to(wheel.resolve())
        if ca_bundle and Path(ca_bundle).is_file():
            shutil.copy(ca_bundle, served / "ca.crt")
        add_environment_build_files(environment, served)
        prepare = _prepare_archive(environment)
        if prepare is not None:
            (served / "prepare.tar").write_bytes(prepare)
        prepared = host_prepared_entry(environment) if scale == "smoke" and hub_endpoint is None else None
        if prepared is not None:
            (served / "prepared.tar").write_bytes(_entry_archive(prepared))
        # The build context: only the two image folders, at their repository paths.
        context = Path(tmp) / "context"
        for folder in ("base", environment.name):
            shutil.copytree(
                sandbox_folder(folder), context / "sandboxes" / folder, ignore=shutil.ignore_patterns("__pycache__")
            )
        with served_build_files(served) as url:
            common = ["build", "--network", "host", "--build-arg", f"BUILD_FILES={url}"]
            _docker(
                *common,
                "--build-arg",
                f"BASE_IMAGE={base_image or DEBIAN_PARENT}",
                "--build-arg",
                f"WHEELS_DIGEST={base_wheels_digest}",
                "-t",
                base_tag(scale),
                "-f",
                str(context / "sandboxes/base/Dockerfile"),
                str(context),
            )
            tag = image_tag(environment.name, scale) if hub_endpoint is None else rehearsal_tag(environment.name)
            rehearsal = ["--build-arg", f"HF_ENDPOINT={hub_endpoint}", "--label", f"{REHEARSAL_LABEL}=stand-in hub"]
            _docker(
                *common,
                *(rehearsal if hub_endpoint is not None else []),
                "--build-arg",
                f"BASE_IMAGE={base_tag(scale)}",
                "--build-arg",
                f"SCALE={scale}",
                # The label says which flash-attn the image got (a rehearsal's stand-in, or "none": left out, and its
                # check fails on that pin).
                *(
                    ["--build-arg", f"FLASH_ATTN_WHEEL={flash_attn}", "--label", f"{FLASH_ATTN_LABEL}={flash_attn}"]
                    if flash_attn
                    else []
                ),
                # Preparation reruns exactly when its code changes (the files arrive over loopback, not by COPY).
                "--build-arg",
                f"PREPARE_DIGEST={digest([prepare or b''])}",
                "-t",
                tag,
                "-f",
                str(context / "sandboxes" / environment.name / "Dockerfile"),
                str(context),
            )
    return tag
