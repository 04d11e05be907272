"""The test suite's host-wide lock (tests/conftest.py): `.ci/run` runs two pytest sessions at once, and a test
marked `timed` or `holds_the_agents_process_slots` must run with no other test beside it."""

import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS
from tests.conftest import runs_alone

REPOSITORY = Path(__file__).parents[2]


def test_an_exclusive_request_waits_for_the_test_running_beside_it():
    # This test holds the shared lock (every test does): another session's exclusive request must wait.
    take_it_alone = "from tests.conftest import host_wide\nwith host_wide(exclusive=True):\n    print('alone')"
    with pytest.raises(subprocess.TimeoutExpired):
        subprocess.run([sys.executable, "-c", take_it_alone], cwd=REPOSITORY, capture_output=True, timeout=3)
    # A shared one does not.
    share_it = take_it_alone.replace("exclusive=True", "exclusive=False")
    shared = subprocess.run([sys.executable, "-c", share_it], cwd=REPOSITORY, capture_output=True, timeout=60)
    assert shared.stdout.decode().strip() == "alone", shared


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
    assert runs_alone(Item(("holds_the_agents_process_slots",), {"name": "restricted_mlm"}))
    assert not runs_alone(Item(("slow",)))
