"""Build an environment's image for a scale, without any container registry: `rebench images build ENV --scale S`.

Two layers of images, tagged by scale: a shared base (`ghcr.io/rebench/base:<version>-<scale>`, Python + torch) and a
thin image per environment on top (its requirements, and its prepared assets in /protected).

- The base's parent is a build argument: the CUDA runtime for `full`; for `smoke`, a Debian made with debootstrap and
  `docker import` (`rebench/debian:bookworm`), so a smoke build needs Debian's and PyPI's mirrors only.
- During a build this module serves a few files on loopback (`BUILD_FILES`): the host's CA bundle (pip and curl
  behind a TLS-intercepting proxy), local wheels (the CPU torch wheel for smoke), the staged tree (the environment's
  `sandbox/`, where `prepare.py` lives, with its libraries), and whatever the environment's `build_files` function
  adds (e.g. a toolchain from the build host). Builds use the host network (`--network host`) to reach it;
  `rebench-build-run` (in the base) fetches them into a temporary folder for one RUN, so no layer keeps the CA or the
  preparation code.
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

from ..runtime.sandbox import IMAGE_REGISTRY, IMAGE_VERSION, image_tag, sandbox_folder
from ..runtime.staging import staged_tree
from ..spec.environment import EnvironmentSpec, Scale

CUDA_PARENT = "nvidia/cuda:12.8.1-cudnn-runtime-ubuntu24.04"
SMOKE_PARENT = "rebench/debian:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# A fixed port keeps BUILD_FILES constant, so Docker's layer cache survives between builds.
BUILD_FILES_PORT = int(os.environ.get("REBENCH_BUILD_FILES_PORT", "8765"))
DEFAULT_CA_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"


def base_tag(scale: Scale) -> str:
    return f"{IMAGE_REGISTRY}/base:{IMAGE_VERSION}-{scale}"


def _docker(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["docker", *args], check=True, **kwargs)


def image_exists(tag: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", tag], capture_output=True, check=False).returncode == 0


def ensure_smoke_parent() -> None:
    """A minimal Debian bookworm image from Debian's own packages (debootstrap, then `docker import`)."""
    if image_exists(SMOKE_PARENT):
        return
    if shutil.which("debootstrap") is None:
        raise RuntimeError(
            "debootstrap is missing: `apt-get install debootstrap` (or `bash sandboxes/engine.sh install`)"
        )
    with tempfile.TemporaryDirectory(prefix="rebench-rootfs-") as rootfs:
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", rootfs, DEBIAN_MIRROR], check=True)
        archive = subprocess.Popen(["tar", "-C", rootfs, "-c", "."], stdout=subprocess.PIPE)
        _docker("import", "-", SMOKE_PARENT, stdin=archive.stdout)
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


def add_environment_build_files(environment: EnvironmentSpec, served: Path) -> None:
    """Call the function the spec names in `build_files` ("module:function") with the served folder."""
    if environment.build_files is None:
        return
    module, _, function = environment.build_files.partition(":")
    getattr(importlib.import_module(module), function)(served)


def _prepare_archive(environment: EnvironmentSpec) -> bytes | None:
    if environment.prepare_script is None:
        return None
    files = staged_tree(environment)
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for relative, source in sorted(files.items()):
            archive.add(source, arcname=relative)
    return buffer.getvalue()


@contextlib.contextmanager
def served_build_files(served: Path) -> Iterator[str]:
    """Serve a folder on loopback for the duration of a build; yields its URL."""
    handler = functools.partial(_QuietHandler, directory=str(served))
    server = _BuildFilesServer(("127.0.0.1", BUILD_FILES_PORT), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{BUILD_FILES_PORT}"
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


def build_image(environment: EnvironmentSpec, scale: Scale, *, ca_bundle: str | None = DEFAULT_CA_BUNDLE) -> str:
    """Build the base (if missing) and the environment's image for `scale`; returns the environment image's tag."""
    if scale == "smoke":
        ensure_smoke_parent()
    with tempfile.TemporaryDirectory(prefix="rebench-build-") as tmp:
        served = Path(tmp) / "served"
        (served / "wheels").mkdir(parents=True)
        for wheel in local_wheels(scale):
            shutil.copy(wheel, served / "wheels" / wheel.name)
        if ca_bundle and Path(ca_bundle).is_file():
            shutil.copy(ca_bundle, served / "ca.crt")
        add_environment_build_files(environment, served)
        prepare = _prepare_archive(environment)
        if prepare is not None:
            (served / "prepare.tar").write_bytes(prepare)
        # The build context: only the two image folders, at their repository paths.
        context = Path(tmp) / "context"
        for folder in ("base", environment.name):
            shutil.copytree(
                sandbox_folder(folder), context / "sandboxes" / folder, ignore=shutil.ignore_patterns("__pycache__")
            )
        with served_build_files(served) as url:
            common = ["build", "--network", "host", "--build-arg", f"BUILD_FILES={url}"]
            parent = SMOKE_PARENT if scale == "smoke" else CUDA_PARENT
            _docker(
                *common,
                "--build-arg",
                f"BASE_IMAGE={parent}",
                "-t",
                base_tag(scale),
                "-f",
                str(context / "sandboxes/base/Dockerfile"),
                str(context),
            )
            tag = image_tag(environment.name, scale)
            _docker(
                *common,
                "--build-arg",
                f"BASE_IMAGE={base_tag(scale)}",
                "--build-arg",
                f"SCALE={scale}",
                # Preparation reruns exactly when its code changes (the files arrive over loopback, not by COPY).
                "--build-arg",
                f"PREPARE_DIGEST={hashlib.sha256(prepare or b'').hexdigest()[:16]}",
                "-t",
                tag,
                "-f",
                str(context / "sandboxes" / environment.name / "Dockerfile"),
                str(context),
            )
    return tag
