"""Shared fixtures: offline mock agents and a toy environment that exercises the machinery in milliseconds."""

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from inspect_ai.model import ModelOutput

from rebench_inspect.spec.environment import Anchors, EnvironmentSpec, Resources, Transform
from rebench_inspect.testing.scripted import scripted_agent

# The tiers' time budgets (rebench_inspect/testing/plugin.py), every environment's fixtures (fixtures.py there);
# pytester for the test of the budgets.
pytest_plugins = ["rebench_inspect.testing.plugin", "rebench_inspect.testing.fixtures", "pytester"]

TOY_FOLDER = Path(__file__).parent / "toy_environment"


def toy_spec() -> EnvironmentSpec:
    """Raw = seconds written in answer.txt, ln-transformed, start 10 → 0, reference 5 → 1."""
    anchors = Anchors(start=10.0, reference=5.0, provenance="toy")
    return EnvironmentSpec(
        name="toy",
        metr_id="toy",
        paper_name="Toy",
        transform=Transform.LOG,
        lower_is_better=True,
        anchors={"smoke": anchors, "full": anchors},
        resources=Resources(gpus=0, cpus=1, memory_gb=1),
        scoring_timeout_s={"smoke": 30, "full": 30},
        location=TOY_FOLDER,
    )


# `.ci/run` runs two pytest sessions at once (the host tiers, and a Docker lane beside them). Two readers-writer locks
# let the tests that need it run apart, every other test holding them shared:
# - the host lock, taken alone by a test marked `timed`: its assertion rests on a timed environment's wall-clock
#   scoring times. The sample measures its smoke anchors at setup under the load of that moment; a test of the other
#   lane starting or ending before it scores moves the time as much as the gap between start and reference (CI saw
#   optimize_llm_foundry's reference score 0.03 against 0.5 asked). On a test parametrised over environments
#   (`environment` or `name`), only the timed ones'.
# - the image agent's lock, held by `docker` tests only and taken alone by one marked `holds_the_agents_process_slots`:
#   its agent uses up the process limit of the images' `agent` uid, which the kernel counts across every container
#   on the host (docs/security-model.md), leaving none for another Docker test's agent. Host tests never run as that
#   uid (their users take THROWAWAY_IDS below), so they go on beside it.
# Each lock is two files: the turnstile lets a waiting exclusive test in before later shared ones. Locks are taken in
# one order (host, then image agent), so two tests never wait for each other. Not reentrant across processes: never
# start pytest from a process that holds one (a wrapper holding it shared): a waiting exclusive test then holds the
# turnstile, the inner pytest waits for it, and nothing moves again.
# (Another folder only for the lock tests' own pytest sessions: tests/machinery/test_tests_host_lock.py.)
_TEST_LOCKS = Path(os.environ.get("REBENCH_TESTS_LOCKS") or Path(tempfile.gettempdir()) / "rebench-tests-locks")
HOST = "host"
IMAGE_AGENT = "image-agent-process-slots"


def runs_alone(item: pytest.Item) -> bool:
    """Whether the test takes the host lock alone (see above); `timed(only=NAMES)` narrows it to those environments."""
    timed = item.get_closest_marker("timed")
    if timed is None:
        return False
    params = item.callspec.params if hasattr(item, "callspec") else {}
    environment = params.get("environment", params.get("name"))
    if environment is None:
        return True
    from rebench.environments import ENVIRONMENTS

    spec = ENVIRONMENTS[environment] if isinstance(environment, str) else environment
    return spec.smoke_anchor_runs > 0 and spec.name in timed.kwargs.get("only", {spec.name})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Marks `runs_alone` the tests that take the host lock alone, before `-m` selects (`.ci/run` runs the slow ones
    together, `-m "slow and runs_alone"`, so that each hands the lock to the next)."""
    for item in items:
        if runs_alone(item):
            item.add_marker("runs_alone")


def locks_held(item: pytest.Item) -> list[tuple[str, bool]]:
    """The locks a test holds while it runs, in the order taken, each with whether it takes it alone."""
    locks = [(HOST, runs_alone(item))]
    if item.get_closest_marker("docker"):
        locks.append((IMAGE_AGENT, item.get_closest_marker("holds_the_agents_process_slots") is not None))
    return locks


@contextmanager
def holding(lock: str, exclusive: bool, folder: Path = _TEST_LOCKS) -> Iterator[None]:
    folder.mkdir(exist_ok=True)
    with open(folder / f"{lock}.turnstile", "a") as turnstile, open(folder / lock, "a") as held:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        fcntl.flock(held, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        yield


# Seconds each test waited for the locks, for the session's summary: a slow CI says how much of it was waiting.
_LOCK_WAITS: dict[str, float] = {}
# A test that takes a lock alone hands its locks straight to the next test of the session that takes the same locks
# alone: released between the two, they would go to a test of the other lane waiting for them, and the next test
# would wait until that one ended (in CI up to 8 minutes, each time).
_NEXT_TEST: list[pytest.Item | None] = [None]
_CARRIED: list[tuple[list[tuple[str, bool]], ExitStack]] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    _NEXT_TEST[0] = nextitem
    return (yield)


@pytest.fixture(autouse=True)
def apart_where_marked(request) -> Iterator[None]:
    locks = locks_held(request.node)
    asked = time.monotonic()
    if _CARRIED and _CARRIED[0][0] == locks:
        held = _CARRIED.pop()[1]
    else:
        while _CARRIED:
            _CARRIED.pop()[1].close()
        held = ExitStack()
        try:
            for lock, exclusive in locks:
                held.enter_context(holding(lock, exclusive))
        except BaseException:
            held.close()
            raise
    _LOCK_WAITS[request.node.nodeid] = time.monotonic() - asked
    try:
        yield
    finally:
        following = _NEXT_TEST[0]
        if following is not None and any(alone for _, alone in locks) and locks_held(following) == locks:
            _CARRIED.append((locks, held))
        else:
            held.close()


def pytest_terminal_summary(terminalreporter) -> None:
    waits = sorted(_LOCK_WAITS.items(), key=lambda wait: wait[1], reverse=True)
    if waits and waits[0][1] >= 1:
        longest = ", ".join(f"{seconds:.0f} s {test}" for test, seconds in waits[:3] if seconds >= 1)
        terminalreporter.write_line(
            f"tests waited {sum(seconds for _, seconds in waits):.0f} s in all for the tests' locks "
            f"(tests/conftest.py; longest: {longest})"
        )


@pytest.fixture
def toy_environment() -> EnvironmentSpec:
    return toy_spec()


@pytest.fixture
def file_every_user_can_write() -> Iterator[Path]:
    """An empty file the test made, that untrusted test code running as another user writes its evidence into. The
    quarantine's sweep removes every file the runner user creates, so the evidence cannot be a new file; and not
    under `tmp_path`, which pytest keeps private to the user running the tests (mode 0700)."""
    folder = Path(tempfile.mkdtemp(prefix="rebench-test-evidence-"))
    folder.chmod(0o755)
    evidence = folder / "evidence.txt"
    evidence.touch(mode=0o666)
    evidence.chmod(0o666)
    yield evidence
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def agent_script() -> Callable[[list[ModelOutput]], object]:
    return scripted_agent


# Host tests' throwaway users take uids from this range, which no image's user has (the images' agent is 1000, their
# rebench-runner 1001, their system users below 1000): the kernel counts a uid's processes across the host and every
# container together, so a host test's user with an image user's uid would spend that user's process limit in the
# containers of the Docker tier running meanwhile (.ci/run runs both at once; seen as EAGAIN when optimize_kernel's
# scorer started its worker as rebench-runner).
THROWAWAY_IDS = (61000, 61999)


def add_throwaway_user(name: str, home: Path | None = None) -> None:
    """Create the user `name` (no login shell; `home` as its home, not created) with a uid no image uses."""
    low, high = THROWAWAY_IDS
    keys = [arg for kind in ("UID", "GID") for arg in ("-K", f"{kind}_MIN={low}", "-K", f"{kind}_MAX={high}")]
    command = ["useradd", *keys, "--no-create-home", "--shell", "/bin/false"]
    if home is not None:
        command += ["--home-dir", str(home)]
    subprocess.run([*command, name], check=True, capture_output=True)
