"""Files the image build fetches from the build host (`EnvironmentSpec.build_files`; runs on the host, at build)."""

import shutil
import subprocess
import tarfile
from pathlib import Path


def toolchain(served: Path) -> None:
    """The host's active Rust toolchain (compiler and standard library, no docs) as `toolchains/rust.tar`, which the
    Dockerfile installs when it is served: rustup's servers are out of reach where only package registries are. A
    host without rustc serves none (the Dockerfile then installs with rustup)."""
    if shutil.which("rustc") is None:
        return
    sysroot = Path(
        subprocess.run(["rustc", "--print", "sysroot"], capture_output=True, text=True, check=True).stdout.strip()
    )
    (served / "toolchains").mkdir()
    with tarfile.open(served / "toolchains" / "rust.tar", mode="w") as archive:
        archive.add(sysroot / "bin" / "rustc", arcname="bin/rustc")
        archive.add(sysroot / "lib", arcname="lib")
