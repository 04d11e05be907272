"""The test suite's locks (tests/conftest.py): `.ci/run` runs two pytest sessions at once; a test marked `timed` must
run with no other test beside it, one marked `holds_the_agents_process_slots` with no other Docker test."""

import subprocess
import sys
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

    def get_closest_marker(self, name):
        return name if name in self.markers else None

    @property
    def callspec(self):
        return Callspec(self.params)


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_a_timed_test_over_environments_runs_alone_only_for_the_timed_ones(name):
    timed = ENVIRONMENTS[name].smoke_anchor_runs > 0
    assert runs_alone(Item(("timed",), {"name": name})) is timed
    assert runs_alone(Item(("timed",), {"environment": ENVIRONMENTS[name]})) is timed
    assert runs_alone(Item((), {"name": name})) is False


def test_the_marked_tests_without_environments_run_alone():
    assert runs_alone(Item(("timed",)))
    assert not runs_alone(Item(("slow",)))


def test_a_docker_test_holding_the_agents_process_slots_runs_apart_from_other_docker_tests_only():
    slots = Item(("docker", "holds_the_agents_process_slots"), {"name": "restricted_mlm"})
    assert locks_held(slots) == [(HOST, False), (IMAGE_AGENT, True)]
    assert locks_held(Item(("docker",), {"name": "restricted_mlm"})) == [(HOST, False), (IMAGE_AGENT, False)]
    assert locks_held(Item(("docker", "timed"), {"name": "optimize_kernel"})) == [(HOST, True), (IMAGE_AGENT, False)]
    assert locks_held(Item(("slow",))) == [(HOST, False)]
