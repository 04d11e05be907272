"""The test suite's locks (tests/conftest.py): `.ci/run` runs two pytest sessions at once; a test marked `timed` must
run with no other test beside it, one marked `holds_the_agents_process_slots` with no other Docker test."""

import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS
from tests.conftest import HOST, IMAGE_AGENT, holding, locks_held, runs_alone

REPOSITORY = Path(__file__).parents[2]


def takes(lock: str, exclusive: bool, folder: Path) -> subprocess.CompletedProcess:
    """Another session taking `lock` in `folder`: times out while a test holding it stands in the way."""
    program = (
        "from pathlib import Path\nfrom tests.conftest import holding\n"
        f"with holding({lock!r}, {exclusive}, Path({str(folder)!r})):\n    print('taken')"
    )
    return subprocess.run([sys.executable, "-c", program], cwd=REPOSITORY, capture_output=True, timeout=5)


def test_a_request_to_run_alone_waits_for_the_test_running_beside_it(tmp_path):
    # In a folder of its own: the other lane's tests hold the suite's locks meanwhile.
    with holding(HOST, exclusive=False, folder=tmp_path):
        with pytest.raises(subprocess.TimeoutExpired):
            takes(HOST, exclusive=True, folder=tmp_path)
        assert takes(HOST, exclusive=False, folder=tmp_path).stdout.decode().strip() == "taken"
    assert takes(HOST, exclusive=True, folder=tmp_path).stdout.decode().strip() == "taken"


@dataclass
class Callspec:
    params: dict


@dataclass
class Item:
    markers: tuple[str, ...]
    params: dict = field(default_factory=dict)
    marker_kwargs: dict[str, dict] = field(default_factory=dict)

    def get_closest_marker(self, name):
        return pytest.Mark(name, (), self.marker_kwargs.get(name, {})) if name in self.markers else None

    @property
    def callspec(self):
        return Callspec(self.params)


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_a_timed_test_over_environments_runs_alone_only_for_the_timed_ones(name):
    timed = ENVIRONMENTS[name].smoke_anchor_runs > 0
    assert runs_alone(Item(("timed",), {"name": name})) is timed
    assert runs_alone(Item(("timed",), {"environment": ENVIRONMENTS[name]})) is timed
    assert runs_alone(Item((), {"name": name})) is False


def test_a_timed_test_named_for_some_environments_runs_alone_only_for_those():
    only = {"timed": {"only": {"optimize_kernel"}}}
    assert runs_alone(Item(("timed",), {"name": "optimize_kernel"}, only))
    assert not runs_alone(Item(("timed",), {"name": "optimize_llm_foundry"}, only))
    assert not runs_alone(Item(("timed",), {"name": "scaling_law"}, only))


def test_the_marked_tests_without_environments_run_alone():
    assert runs_alone(Item(("timed",)))
    assert not runs_alone(Item(("slow",)))


def test_a_docker_test_holding_the_agents_process_slots_runs_apart_from_other_docker_tests_only():
    slots = Item(("docker", "holds_the_agents_process_slots"), {"name": "restricted_mlm"})
    assert locks_held(slots) == [(HOST, False), (IMAGE_AGENT, True)]
    assert locks_held(Item(("docker",), {"name": "restricted_mlm"})) == [(HOST, False), (IMAGE_AGENT, False)]
    assert locks_held(Item(("docker", "timed"), {"name": "optimize_kernel"})) == [(HOST, True), (IMAGE_AGENT, False)]
    assert locks_held(Item(("slow",))) == [(HOST, False)]


HANDED_OVER = '''
import subprocess, sys, time
from pathlib import Path
import pytest

GOT_IT = Path(sys.argv[0]).parent / "the-other-lane-got-the-lock"
OTHER_LANE = (
    "import sys\\nfrom pathlib import Path\\nfrom tests.conftest import holding\\n"
    "with holding('host', False):\\n    Path(sys.argv[1]).touch()"
)


@pytest.mark.timed
def test_first(tmp_path_factory):
    GOT_IT.unlink(missing_ok=True)
    subprocess.Popen([sys.executable, "-c", OTHER_LANE, str(GOT_IT)], cwd=REPOSITORY)
    time.sleep(2)  # it now waits for the lock this test holds alone
    assert not GOT_IT.exists()


@pytest.mark.timed
def test_second():
    time.sleep(2)
    assert not GOT_IT.exists()  # the lock went straight from the first test to this one
'''


def test_a_test_running_alone_hands_the_lock_to_the_next_test_running_alone(tmp_path):
    """Released between the two, the lock would go to the other lane's waiting test first (tests/conftest.py)."""
    probe = tmp_path / "test_probe.py"
    probe.write_text(f"REPOSITORY = {str(REPOSITORY)!r}\n" + HANDED_OVER.replace("sys.argv[0]", "__file__"))
    locks = tmp_path / "locks"
    completed = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider", str(probe)],
        cwd=REPOSITORY,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "REBENCH_TESTS_LOCKS": str(locks)},
    )
    assert completed.returncode == 0, completed.stdout[-3000:]
    deadline = time.monotonic() + 30  # and the other lane's test got it after the session
    while not (tmp_path / "the-other-lane-got-the-lock").exists():
        assert time.monotonic() < deadline
        time.sleep(0.2)
