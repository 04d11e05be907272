"""`rebench prepare`: warm the cache of prepared assets for environments, and list what the cache holds.

The cache (`cache_root()`, docs/CONTRACT.md R7) holds content-keyed entries `<environment>/<kind>-<key>` (smoke
assets, trained reference and starting models), each built once by `sandbox_lib.cache.cached_entry`, and what else
rebench keeps there (generated k8s values). Warming runs the environment's setup and one scoring run of its starting
solution on the local sandbox, exactly as `rebench score` does, so every entry that path builds is built.
"""

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rebench.sandbox_lib.cache import COMPLETE, entry_lock, is_complete, remove_leftovers
from rebench.sandbox_lib.paths import cache_root

from ..spec.environment import ResolvedEnvironment

if TYPE_CHECKING:
    from inspect_ai import Task


@dataclass(frozen=True)
class CachedItem:
    path: Path
    size_bytes: int
    complete: bool | None  # None: not a content-keyed entry (a file, a tool's folder)
    build_seconds: float | None = None


def tree_size(path: Path) -> int:
    """Bytes under `path`, links not followed."""
    if not path.is_dir() or path.is_symlink():
        return path.lstat().st_size
    total = 0
    for root, dirs, files in os.walk(path):
        for name in [*dirs, *files]:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:  # removed meanwhile
                pass
    return total


def _build_seconds(entry: Path) -> float | None:
    try:
        return float((entry / COMPLETE).read_text())
    except (OSError, ValueError):
        return None


def cache_listing(root: Path | None = None) -> list[CachedItem]:
    """Every item one level below each folder of the cache (entries, leftovers of killed builds, files)."""
    root = root or cache_root()
    items: list[CachedItem] = []
    for group in sorted(root.iterdir()) if root.is_dir() else []:
        if not group.is_dir() or group.is_symlink() or not any(group.glob("*/" + COMPLETE)):
            items.append(CachedItem(group, tree_size(group), None))
            continue
        for path in sorted(group.iterdir()):
            if path.name.endswith(".lock"):
                continue
            complete = is_complete(path) if path.is_dir() else None
            items.append(CachedItem(path, tree_size(path), complete, _build_seconds(path) if complete else None))
    return items


def has_prepared_assets(root: Path | None = None) -> bool:
    return any(item.complete for item in cache_listing(root))


def sweep_leftovers(root: Path | None = None) -> int:
    """Remove the temporary folders of killed builds (`.<entry>.*`) whose entry no build holds now; returns how
    many entries had some. An entry being built keeps its folder: its lock is taken, so it is skipped."""
    swept = 0
    root = root or cache_root()
    for group in root.iterdir() if root.is_dir() else []:
        if not group.is_dir() or group.is_symlink():
            continue
        names = {path.name[1:].split(".", 1)[0] for path in group.glob(".*.*") if path.is_dir()}
        for name in sorted(names):
            try:
                with entry_lock(group / name, blocking=False):
                    remove_leftovers(group / name)
                    swept += 1
            except BlockingIOError:
                continue
    return swept


def format_size(size: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    raise AssertionError("unreachable")


def print_listing(root: Path | None = None) -> None:
    root = root or cache_root()
    items = cache_listing(root)
    print(f"cache {root}:")
    for item in items:
        if item.complete:
            state = "complete" + (f", built in {item.build_seconds:.0f} s" if item.build_seconds is not None else "")
        elif item.path.name.startswith(".") and item.path.is_dir():
            state = "leftover of a killed build"
        else:
            state = "file" if item.path.is_file() else "folder"
        print(f"  {format_size(item.size_bytes):>10}  {item.path.relative_to(root)}  ({state})")
    print(f"  {format_size(sum(item.size_bytes for item in items)):>10}  in all")


def warm(environment: ResolvedEnvironment, environment_task: "Task") -> dict:
    """Prepare the environment on the local sandbox and score its starting solution once with `environment_task`
    (the environment's own task: its services and instruction fields) (the result); measured anchors are left to the
    runs that use them (they are not cached: they hold for the machine's load of the moment)."""
    from ..runtime.workspace_score import score_workspace

    started = time.monotonic()
    result = score_workspace(environment, None, environment_task, measure_anchors=False)
    return {**result, "seconds": round(time.monotonic() - started, 1)}
