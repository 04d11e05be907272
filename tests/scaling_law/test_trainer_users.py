"""The trainer the agent starts through the image's sudo rule is the agent's process too: the stop before the final
score ends it. Skips where the image's users and sudo rule are missing (the host); the Docker tier runs it inside
the image (tests/docker/test_hacks_in_container.py)."""

import json
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from rebench.sandbox_lib.users import processes_of
from rebench.scaling_law.task import ENVIRONMENT
from tests.scoring_program import run_final_stop

AGENT, TRAINER = "agent", "rebench-trainer"
ENTRY_POINT = ["/opt/venv/bin/python3", "-I", "/scaling_law_trainer/trainer.py"]  # the sudo rule's command


def _image_ready() -> bool:
    if os.geteuid() != 0 or not shutil.which("sudo") or not Path(ENTRY_POINT[2]).is_file():
        return False
    try:
        pwd.getpwnam(AGENT), pwd.getpwnam(TRAINER)
    except KeyError:
        return False
    return True


pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(not _image_ready(), reason="needs root, sudo and the image's `agent` and `rebench-trainer`"),
]


def test_the_final_stop_ends_a_trainer_the_agent_started_through_sudo(tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="trainer-stop-"))
    os.chmod(shared, 0o755)
    config = shared / "config"
    os.mkfifo(config, 0o644)
    # The config's writer is held here, not by the agent: the trainer waits for it whatever happens to the agent.
    writer = os.open(config, os.O_RDWR)
    trainer_uid = pwd.getpwnam(TRAINER).pw_uid
    try:
        start = f"sudo -n -u {TRAINER} {' '.join(ENTRY_POINT)} --name held < {config} > /dev/null 2>&1 &"
        subprocess.run(["runuser", "-u", AGENT, "--", "sh", "-c", start], check=True, timeout=30)
        deadline = time.monotonic() + 30
        while not processes_of([trainer_uid]):
            assert time.monotonic() < deadline, "the trainer did not start"
            time.sleep(0.1)
        completed = run_final_stop(ENVIRONMENT, AGENT, tmp_path / "protected")
        assert completed.returncode == 0, completed.stderr[-2000:]
        report = json.loads(completed.stdout)
        assert (report["users"], report["survivors"]) == ([AGENT, TRAINER], [])
        assert not processes_of([trainer_uid, pwd.getpwnam(AGENT).pw_uid])
    finally:
        os.close(writer)
        subprocess.run(["pkill", "-KILL", "-u", TRAINER], check=False)
        shutil.rmtree(shared, ignore_errors=True)
