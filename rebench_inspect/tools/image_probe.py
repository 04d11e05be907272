"""What an image holds, printed as one JSON object: run inside the image by `rehearsal.check_image` (`python3 -`, the
image's own Python, standard library only; torch is imported when the image has it).

Reports the version of every package in each Python environment (names normalised as pip does), the CUDA libraries
torch came with (and whether they load: no GPU is needed to load them), the accounts, and the owners and modes of the
folders the security model relies on.
"""

import json
import os
import pwd
import stat
import subprocess

# Python environments of the images: the shared venv, and the LLM Foundry stack's own.
PYTHONS = {"/opt/venv": "/opt/venv/bin/python3", "/opt/llm-foundry": "/opt/llm-foundry/bin/python"}
ACCOUNTS = ("root", "agent", "rebench-runner", "rebench-trainer")
PATHS = ("/protected", "/home/agent", "/home/agent/workspace", "/scaling_law_trainer", "/etc/sudoers.d")
# What each Python reports about itself: versions, and torch's CUDA stack when torch is there.
INNER = r"""
import ctypes, glob, importlib.metadata, json, os, re, sys
versions = {
    re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower(): dist.version for dist in importlib.metadata.distributions()
}
report = {"python": sys.version.split()[0], "packages": versions}
try:
    import torch
except ImportError:
    torch = None
if torch is not None:
    libraries = {}
    site = os.path.dirname(os.path.dirname(torch.__file__))
    for path in sorted(glob.glob(os.path.join(site, "nvidia", "**", "lib*.so*"), recursive=True)):
        name = os.path.basename(path).split(".so")[0]
        if name in libraries:
            continue
        try:
            ctypes.CDLL(path)
            libraries[name] = "loads"
        except OSError as ex:
            libraries[name] = f"does not load: {ex}"[:200]
    try:
        cudnn = torch.backends.cudnn.version()
    except Exception as ex:  # noqa: BLE001 - reported, not raised
        cudnn = f"error: {type(ex).__name__}"
    report["torch"] = {
        "cuda": torch.version.cuda,
        "cudnn": cudnn,
        "cuda_available": torch.cuda.is_available(),
        "libraries": libraries,
    }
print(json.dumps(report))
"""


def python_report(python: str) -> dict[str, object] | None:
    if not os.path.exists(python):
        return None
    done = subprocess.run([python, "-c", INNER], capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        return {"error": done.stderr[-2000:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def account(name: str) -> dict[str, object] | None:
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        return None
    return {"uid": entry.pw_uid, "home": entry.pw_dir, "shell": entry.pw_shell}


def path_facts(path: str) -> dict[str, object] | None:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return None
    return {
        "owner": pwd.getpwuid(status.st_uid).pw_name,
        "mode": oct(stat.S_IMODE(status.st_mode)),
        "kind": "folder" if stat.S_ISDIR(status.st_mode) else "other",
    }


def readable_by_others(root: str) -> list[str]:
    """Files under `root` that a user other than the owner could read (the protected folder must have none)."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            if os.lstat(path).st_mode & (stat.S_IRGRP | stat.S_IROTH):
                found.append(path)
    return found[:20]


def main() -> None:
    report = {
        "pythons": {venv: python_report(python) for venv, python in PYTHONS.items()},
        "accounts": {name: account(name) for name in ACCOUNTS},
        "paths": {path: path_facts(path) for path in PATHS},
        "protected_readable_by_others": readable_by_others("/protected"),
        "protected_files": sum(len(names) for _, _, names in os.walk("/protected")),
        "workspace_files": sorted(os.listdir("/home/agent/workspace"))
        if os.path.isdir("/home/agent/workspace")
        else [],
        "nvidia_driver_capabilities": os.environ.get("NVIDIA_DRIVER_CAPABILITIES"),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
