"""The one entry point of every `prepare.py` (docs/CONTRACT.md): an environment writes only its build function.

    # tasks/<name>/sandbox/prepare.py
    PREPARATION = Preparation("<name>", build, SETTINGS, code=[Path(__file__), <helpers the build uses>])
    if __name__ == "__main__":
        sys.exit(PREPARATION.main())

    <python> -m rebench.<name>.sandbox.prepare --scale {smoke,full} --workspace WS --protected P [--setup] [--no-cache]

- Preparing twice changes nothing, at either scale: a marker `P/prepared.json` records the scale and a key that
  hashes the build's code and settings; a matching marker makes preparation a no-op.
- `--setup` (the host's task setup): at full scale the assets come from the image build, so setup never builds
  (in a `network_mode: none` container that would be a failed download and a new secret); without them the
  sandbox is broken and setup fails with a clear message.
- smoke: assets are built once per key into `<cache_root()>/<name>/smoke-<key>` (paths.py; root-only, it holds
  held-out data) by `cache.cached_entry`: one build across concurrent samples and processes (a file lock), in a
  temporary folder renamed into place, leftovers of killed builds removed; then copied in.
The build is handed `workspace` and `protected` already created. Protected files end up mode 600 in a mode-700
folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .cache import cached_entry
from .paths import cache_root

MARKER = "prepared.json"

Build = Callable[..., Any]  # build(scale, workspace, protected, settings, **build_kwargs)


def log(message: str) -> None:
    print(f"[prepare {time.strftime('%H:%M:%S')}] {message}", flush=True)


def _code_files(paths: Sequence[Path]) -> list[tuple[str, Path]]:
    files: list[tuple[str, Path]] = []
    for path in paths:
        if path.is_dir():
            files.extend((f"{path.name}/{p.relative_to(path)}", p) for p in sorted(path.rglob("*.py")))
        else:
            files.append((path.name, path))
    return files


def lock_down(protected: Path) -> None:
    """Root-only: the folder and its subfolders 700, its files 600."""
    os.chmod(protected, 0o700)
    for root, dirs, files in os.walk(protected):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o700)
        for name in files:
            os.chmod(os.path.join(root, name), 0o600)


def content_key(code: Sequence[Path], scale: str, settings: object) -> str:
    """Hash of the code files (folders: their `.py` files) and the settings a build of `scale` uses."""
    digest = hashlib.sha256()
    for name, path in _code_files(code):
        digest.update(name.encode() + b"\0" + path.read_bytes())
    digest.update(json.dumps({"scale": scale, "settings": settings}, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:16]


def cache_entry(name: str, scale: str, key: str) -> Path:
    """Where the cache keeps the `scale` assets of preparation `name` built with `key` (`Preparation.key`)."""
    return cache_root() / name / f"{scale}-{key}"


class Preparation:
    def __init__(self, name: str, build: Build, settings: Mapping[str, dict], *, code: Sequence[Path]) -> None:
        self.name, self.build, self.settings, self.code = name, build, settings, list(code)

    def key(self, scale: str, settings: dict | None = None) -> str:
        """Hash of the build's code and settings: a cache entry or marker with another key is stale."""
        chosen = self.settings[scale] if settings is None else settings
        return content_key(self.code, scale, chosen)

    @staticmethod
    def marker(protected: Path) -> dict | None:
        try:
            data = json.loads((protected / MARKER).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def prepare(
        self,
        scale: str,
        workspace: Path,
        protected: Path,
        *,
        setup: bool = False,
        use_cache: bool = True,
        settings: dict | None = None,
        **build_kwargs: Any,
    ) -> str:
        """Prepare `scale` into the folders; returns what happened: "already prepared", "cached" or "built"."""
        chosen = self.settings[scale] if settings is None else settings
        key = self.key(scale, chosen)
        marker = self.marker(protected)
        if use_cache and marker == {"environment": self.name, "scale": scale, "key": key}:
            log("already prepared")
            return "already prepared"
        if setup and scale == "full":
            if marker is not None and marker.get("scale") == "full":
                log(f"using the image's full-scale assets (built with key {marker.get('key')}, this code has {key})")
                return "already prepared"
            raise SystemExit(
                f"{self.name}: full-scale assets are built into the image (prepare.py --scale full at image build); "
                f"this sandbox has none under {protected}. Build the environment's image (`rebench images build`)."
            )
        workspace.mkdir(parents=True, exist_ok=True)
        protected.mkdir(parents=True, exist_ok=True)
        os.chmod(protected, 0o700)
        if scale == "full":
            self.build(scale, workspace, protected, chosen, **build_kwargs)
            outcome = "built"
        else:
            entry, outcome = self._cached_build(scale, key, chosen, use_cache, build_kwargs)
            shutil.copytree(entry / "workspace", workspace, dirs_exist_ok=True)
            shutil.copytree(entry / "protected", protected, dirs_exist_ok=True)
        lock_down(protected)
        (protected / MARKER).write_text(json.dumps({"environment": self.name, "scale": scale, "key": key}))
        os.chmod(protected / MARKER, 0o600)
        return outcome

    def _cached_build(
        self, scale: str, key: str, settings: dict, use_cache: bool, build_kwargs: dict[str, Any]
    ) -> tuple[Path, str]:
        entry = cache_entry(self.name, scale, key)
        entry.parent.mkdir(parents=True, exist_ok=True)
        os.chmod(entry.parent, 0o700)  # the cache holds held-out data and secrets

        def build_entry(folder: Path) -> None:
            started = time.time()
            (folder / "workspace").mkdir()
            (folder / "protected").mkdir(mode=0o700)
            self.build(scale, folder / "workspace", folder / "protected", settings, **build_kwargs)
            log(f"built {scale} assets in {time.time() - started:.1f}s")

        entry, built = cached_entry(entry, build_entry, rebuild=not use_cache)
        if not built:
            log(f"using cached {scale} assets {entry}")
        return entry, "built" if built else "cached"

    def main(self, argv: list[str] | None = None) -> int:
        parser = argparse.ArgumentParser(description=f"prepare the {self.name} environment's models and data")
        parser.add_argument("--scale", choices=["smoke", "full"], required=True)
        parser.add_argument("--workspace", type=Path, required=True)
        parser.add_argument("--protected", type=Path, required=True)
        parser.add_argument("--setup", action="store_true", help="task setup: never build full-scale assets")
        parser.add_argument("--no-cache", action="store_true", help="rebuild even when prepared or cached")
        args = parser.parse_args(argv)
        self.prepare(args.scale, args.workspace, args.protected, setup=args.setup, use_cache=not args.no_cache)
        return 0
