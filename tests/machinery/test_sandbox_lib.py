"""The sandbox-side library: the scoring `main`, the workspace snapshot, the preparation guard and cache."""

import json
import os
import pwd
import resource
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rebench.sandbox_lib import Preparation, SnapshotTooLarge, snapshot_tree
from rebench.sandbox_lib.processes import descendants


# ------------------------------------------------------------------------------------------------ snapshot
def test_snapshot_skips_pipes_and_links_leaving_the_workspace_and_honours_ignore(tmp_path):
    workspace, copy = tmp_path / "ws", tmp_path / "copy"
    (workspace / "pkg" / "__pycache__").mkdir(parents=True)
    copy.mkdir()
    (workspace / "solution.py").write_text("x = 1\n")
    (workspace / "pkg" / "mod.py").write_text("y = 2\n")
    (workspace / "pkg" / "__pycache__" / "mod.pyc").write_bytes(b"\0")
    (workspace / "notes.tmp").write_text("scratch")
    os.mkfifo(workspace / "pkg" / "pipe")
    (workspace / "secret").symlink_to("/etc/passwd")
    (workspace / "escape").symlink_to("../../outside")
    (workspace / "inside").symlink_to("pkg/mod.py")
    started = time.monotonic()
    report = snapshot_tree(workspace, copy, ignore=("__pycache__", "*.tmp"))
    assert time.monotonic() - started < 10  # the pipe was never opened for reading
    assert sorted(p.relative_to(copy).as_posix() for p in copy.rglob("*")) == [
        "inside", "pkg", "pkg/mod.py", "solution.py",
    ]
    assert (copy / "inside").read_text() == "y = 2\n"
    assert sorted(report.skipped) == [
        "escape (a link that leaves the workspace)",
        "pkg/pipe (not a regular file or directory)",
        "secret (a link that leaves the workspace)",
    ]
    assert report.files == 2


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ({"max_bytes": 4096}, "the workspace holds more than 4096 bytes to score"),
        ({"max_entries": 3}, "the workspace holds more than 3 files, folders and links to score"),
        ({"max_depth": 2}, "the workspace nests folders more than 2 deep"),
        ({"max_path_bytes": 12}, "the workspace holds a path longer than 12 bytes"),
        ({"max_seconds": 0}, "copying the workspace took longer than 0 s"),
    ],
    ids=["bytes", "entries", "depth", "path", "time"],
)
def test_snapshot_stops_past_each_of_its_bounds(tmp_path, limit, message):
    (tmp_path / "ws" / "a" / "b" / "c").mkdir(parents=True)
    (tmp_path / "copy").mkdir()
    (tmp_path / "ws" / "a" / "b" / "c" / "big.bin").write_bytes(b"x" * 5000)  # 4 entries, 3 deep, a 13-byte path
    descriptors = len(os.listdir("/proc/self/fd"))
    with pytest.raises(SnapshotTooLarge) as refused:
        snapshot_tree(tmp_path / "ws", tmp_path / "copy", **limit)
    assert str(refused.value.reason) == message
    assert len(os.listdir("/proc/self/fd")) == descriptors  # every folder's, on both sides, closed on the way out


def test_snapshot_leaves_out_a_chain_of_links_that_leaves(tmp_path):
    """`l` climbs from a/b/c to the workspace; `up` = a/b/c/l/../../.. is lexically `a`, but resolves `l` first."""
    workspace, copy = tmp_path / "deep" / "ws", tmp_path / "copy"
    (workspace / "a" / "b" / "c").mkdir(parents=True)
    (workspace / "a" / "b" / "c" / "l").symlink_to("../../..")
    (workspace / "up").symlink_to("a/b/c/l/../../..")
    copy.mkdir()
    report = snapshot_tree(workspace, copy)
    assert report.skipped == ["up (a link that leaves the workspace)"]
    assert os.readlink(copy / "a" / "b" / "c" / "l") == "../../.." and not os.path.lexists(copy / "up")


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user takes root")
def test_snapshot_gives_every_entry_to_its_owner(tmp_path):
    workspace, copy = tmp_path / "ws", tmp_path / "copy"
    (workspace / "pkg").mkdir(parents=True)
    (workspace / "pkg" / "mod.py").write_text("y = 2\n")
    os.chmod(workspace / "pkg" / "mod.py", 0o4777)
    (workspace / "inside").symlink_to("pkg/mod.py")
    copy.mkdir()
    snapshot_tree(workspace, copy, user="nobody")
    nobody = pwd.getpwnam("nobody").pw_uid
    assert {os.lstat(path).st_uid for path in [copy, *copy.rglob("*")]} == {nobody}
    assert stat.S_IMODE(os.stat(copy / "pkg" / "mod.py").st_mode) == 0o755
    assert (copy / "inside").read_text() == "y = 2\n"


# ------------------------------------------------------------------------------------------------ main
PROGRAM = """
import os, subprocess, sys
from rebench.sandbox_lib import InfrastructureError, Invalid, Reason, Scored, main

NO_GOOD = Reason("no good")
JUDGE_DOWN = Reason("the judge is down")
COUNTED = Reason("counted")

def score(run):
    files = sorted(p.name for p in run.snapshot().iterdir())
    # a daemon that escapes its parent's session, as an agent's code might start
    subprocess.Popen(["sh", "-c", "setsid sleep 300 & echo $! > {pidfile}"]).wait()
    mode = (run.workspace / "mode").read_text().strip()
    if mode == "invalid":
        raise Invalid(NO_GOOD, details={{"snapshot_as_expected": files == ["keep.py", "mode"]}})
    if mode == "infrastructure":
        raise InfrastructureError(JUDGE_DOWN)
    if mode == "bug":
        raise KeyError(mode.upper() + "-HELD-OUT")
    if mode == "missing-asset":
        (run.protected / "no-such-asset").read_bytes()
    details = {{"snapshot_as_expected": files == ["keep.py", "mode"], "left": run.remaining()}}
    return Scored(raw=float(len(files)), message=COUNTED, details=details)

sys.exit(main(score))
"""


def run_program(tmp_path: Path, mode: str, extra: list[str] = ()) -> tuple[subprocess.CompletedProcess, dict | None]:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    (workspace / "mode").write_text(mode)
    (workspace / "keep.py").write_text("")
    (workspace / "skip.log").write_text("")
    if not (workspace / "fifo").exists():
        os.mkfifo(workspace / "fifo")
    program = tmp_path / "score.py"
    pidfile = tmp_path / "daemon.pid"
    program.write_text(PROGRAM.format(pidfile=pidfile))
    result = tmp_path / "result.json"
    result.unlink(missing_ok=True)
    completed = subprocess.run(
        [sys.executable, str(program), "--workspace", str(workspace), "--protected", str(tmp_path), "--scale",
         "smoke", "--result", str(result), "--ignore", "*.log", "--time-limit", "60", *extra],
        capture_output=True, text=True, timeout=120,
    )
    daemon = int(pidfile.read_text())
    assert not Path(f"/proc/{daemon}").exists() or "Z" in Path(f"/proc/{daemon}/stat").read_text().split()[2]
    return completed, json.loads(result.read_text()) if result.exists() else None


def test_main_scores_a_snapshot_honouring_the_ignore_list_and_kills_what_scoring_started(tmp_path):
    completed, result = run_program(tmp_path, "valid")
    assert completed.returncode == 0, completed.stderr
    assert result["valid"] and result["details"]["snapshot_as_expected"]
    assert result["raw"] == 2.0 and 0 < result["details"]["left"] <= 60
    assert result["details"]["snapshot_skipped_files"] is True  # the fifo: whether, never which


def test_main_reports_invalid_submissions_and_fails_on_infrastructure_errors(tmp_path):
    completed, result = run_program(tmp_path, "invalid")
    assert completed.returncode == 0 and result["valid"] is False and result["message"] == "no good"
    assert result["details"]["snapshot_as_expected"]
    for mode in ("infrastructure", "missing-asset"):
        completed, result = run_program(tmp_path, mode)
        assert completed.returncode == 2 and result is None, mode
    assert "the judge is down" in run_program(tmp_path, "infrastructure")[0].stderr


def test_a_scorer_bug_set_off_by_the_submission_is_a_flagged_invalid_verdict(tmp_path):
    """Issue 21: an agent must not turn a bad score into an errored (retried) sample by crashing the scorer."""
    completed, result = run_program(tmp_path, "bug")
    assert completed.returncode == 0, completed.stderr
    assert result["valid"] is False and result["raw"] is None
    assert result["message"] == "the scoring program failed on the submission; counted as invalid"
    assert result["details"]["scoring_failure"] is True
    # neither the verdict nor stderr (which reaches the log) quotes the exception's text: its type and lines only
    assert "BUG-HELD-OUT" not in json.dumps(result) and "BUG-HELD-OUT" not in completed.stderr
    assert "KeyError" in completed.stderr and "score.py" in completed.stderr


def test_no_descendant_outlives_main_in_process(tmp_path, monkeypatch):
    """Run `main` inside this process: its work directory is gone and it leaves no child behind."""
    from rebench.sandbox_lib import Reason, Scored, main

    seen: dict[str, Path] = {}

    def score(run):
        seen["work"] = run.work
        subprocess.Popen(["sleep", "300"])
        return Scored(1.0, Reason("ok"))

    (tmp_path / "ws").mkdir()
    before = set(descendants())
    argv = ["--workspace", str(tmp_path / "ws"), "--protected", str(tmp_path), "--scale", "smoke",
            "--result", str(tmp_path / "r.json")]
    assert main(score, argv) == 0
    assert not seen["work"].exists()
    assert set(descendants()) <= before


# ------------------------------------------------------------------------------------------------ preparation
class CountingBuild:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, scale, workspace, protected, settings, **kwargs):
        self.calls += 1
        assert workspace.is_dir() and protected.is_dir(), "Preparation creates both folders before the build"
        (workspace / "model.bin").write_text(f"build {self.calls}")
        (protected / "secret.json").write_text(json.dumps({"seed": os.urandom(8).hex()}))


def preparation(tmp_path: Path) -> tuple[Preparation, CountingBuild]:
    code = tmp_path / "prepare_code.py"
    code.write_text("# the build's code\n")
    build = CountingBuild()
    return Preparation("toy", build, {"smoke": {"n": 1}, "full": {"n": 2}}, code=[code]), build


def test_preparing_twice_is_a_no_op_at_full_scale_and_setup_never_builds(tmp_path):
    prep, build = preparation(tmp_path)
    workspace, protected = tmp_path / "ws", tmp_path / "protected"
    with pytest.raises(SystemExit, match="built into the image"):
        prep.prepare("full", workspace, protected, setup=True)
    assert build.calls == 0
    assert prep.prepare("full", workspace, protected) == "built"
    secret = (protected / "secret.json").read_text()
    assert prep.prepare("full", workspace, protected) == "already prepared"
    assert prep.prepare("full", workspace, protected, setup=True) == "already prepared"
    assert build.calls == 1 and (protected / "secret.json").read_text() == secret
    assert oct(protected.stat().st_mode & 0o777) == "0o700"
    assert oct((protected / "secret.json").stat().st_mode & 0o777) == "0o600"


def test_smoke_assets_are_built_once_per_key_and_swapped_in_whole(tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    prep, build = preparation(tmp_path)
    # a stale, incomplete entry of the same key (an interrupted build) is replaced, never used
    stale = tmp_path / "cache" / "toy" / f"smoke-{prep.key('smoke')}"
    (stale / "workspace").mkdir(parents=True)
    assert prep.prepare("smoke", tmp_path / "a" / "ws", tmp_path / "a" / "p") == "built"
    assert prep.prepare("smoke", tmp_path / "b" / "ws", tmp_path / "b" / "p") == "cached"
    assert build.calls == 1
    assert (tmp_path / "b" / "p" / "secret.json").read_text() == (tmp_path / "a" / "p" / "secret.json").read_text()
    before = (tmp_path / "b" / "ws" / "model.bin").stat().st_mtime_ns
    (tmp_path / "b" / "ws" / "model.bin").write_text("the agent's change")
    assert prep.prepare("smoke", tmp_path / "b" / "ws", tmp_path / "b" / "p", setup=True) == "already prepared"
    assert (tmp_path / "b" / "ws" / "model.bin").read_text() == "the agent's change" and before
    assert sorted(p.name for p in (tmp_path / "cache" / "toy").iterdir()) == [f".{stale.name}.lock", stale.name]
    # the key hashes the code: another build code is another entry
    (tmp_path / "prepare_code.py").write_text("# changed\n")
    assert prep.prepare("smoke", tmp_path / "c" / "ws", tmp_path / "c" / "p") == "built" and build.calls == 2


# Two processes preparing one cold entry: the build sleeps, so without the lock both would build it.
CONCURRENT_PREPARATION = """
import sys, time
from pathlib import Path
from rebench.sandbox_lib import Preparation

def build(scale, workspace, protected, settings):
    with open(sys.argv[1], "a") as builds:
        builds.write("build\\n")
    time.sleep(2)
    (workspace / "model.bin").write_text("weights")

code = Path(sys.argv[2])
outcome = Preparation("toy", build, {"smoke": {}}, code=[code]).prepare("smoke", Path(sys.argv[3]), Path(sys.argv[4]))
print(outcome)
"""


def test_concurrent_processes_prepare_one_cache_entry_once_and_leave_no_temporary_folders(tmp_path):
    code = tmp_path / "prepare_code.py"
    code.write_text("# the build's code\n")
    builds = tmp_path / "builds.txt"
    env = {**os.environ, "REBENCH_CACHE_DIR": str(tmp_path / "cache")}
    # a killed build's temporary folder, left from before: the next builder of the entry removes it
    key = Preparation("toy", CountingBuild(), {"smoke": {}}, code=[code]).key("smoke")
    killed = tmp_path / "cache" / "toy" / f".smoke-{key}.build-killed"
    (killed / "workspace").mkdir(parents=True)
    runs = [
        subprocess.Popen(
            [sys.executable, "-c", CONCURRENT_PREPARATION, str(builds), str(code), str(tmp_path / f"ws{i}"),
             str(tmp_path / f"p{i}")],
            env=env, stdout=subprocess.PIPE, text=True,
        )
        for i in range(2)
    ]
    outcomes = sorted(run.communicate(timeout=120)[0].splitlines()[-1] for run in runs)
    assert [run.returncode for run in runs] == [0, 0]
    assert builds.read_text().splitlines() == ["build"], "one preparation for the two processes"
    assert outcomes == ["built", "cached"]
    assert all((tmp_path / f"ws{i}" / "model.bin").read_text() == "weights" for i in range(2))
    assert sorted(p.name for p in (tmp_path / "cache" / "toy").iterdir()) == [f".smoke-{key}.lock", f"smoke-{key}"]


def test_a_failed_build_leaves_no_entry_and_no_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))

    def failing(scale, workspace, protected, settings):
        (workspace / "half.bin").write_text("half")
        raise RuntimeError("the download failed")

    code = tmp_path / "prepare_code.py"
    code.write_text("# the build's code\n")
    with pytest.raises(RuntimeError):
        Preparation("toy", failing, {"smoke": {}}, code=[code]).prepare("smoke", tmp_path / "ws", tmp_path / "p")
    assert [p.name for p in (tmp_path / "cache" / "toy").iterdir() if not p.name.endswith(".lock")] == []


def test_prepare_main_parses_the_hosts_command_line(tmp_path, toy_environment):
    from rebench_inspect.runtime.staging import prepare_command

    prep, build = preparation(tmp_path)
    command, cwd = prepare_command(
        toy_environment.at("full"),
        python="python",
        code_dir="/x",
        workspace=tmp_path / "ws",
        protected=tmp_path / "p",
        setup=True,
    )
    assert command[:3] == ["python", "-m", "rebench.toy.sandbox.prepare"] and cwd == "/x"
    with pytest.raises(SystemExit):
        prep.main(command[3:])
    assert build.calls == 0
    assert prep.main([arg for arg in command[3:] if arg != "--setup"]) == 0 and build.calls == 1


def test_scoring_command_carries_the_ignore_list_and_the_time_limit(toy_environment):
    from rebench_inspect.runtime.staging import scoring_command

    environment = toy_environment.model_copy(update={"workspace_ignore": ("*.log", "cache")})
    command, cwd = scoring_command(
        environment.at("smoke"),
        python="py",
        code_dir="/s",
        workspace="/w",
        protected="/p",
        result="/r",
        run_as="agent",
        scratch="/x",
    )
    assert command[:3] == ["py", "-m", "rebench.toy.sandbox.score"] and cwd == "/s"
    assert " ".join(command[3:]) == (
        "--workspace /w --protected /p --scale smoke --result /r --time-limit 30 --ignore *.log --ignore cache "
        "--scratch /x --run-as agent"
    )


SCRATCH_PROGRAM = """
import os, subprocess, sys, tempfile
from rebench.sandbox_lib import Reason, Scored, main, run_untrusted

def score(run):
    scratch = os.path.realpath(os.environ["TMPDIR"])
    root_child = subprocess.run([sys.executable, "-c", "import tempfile; print(tempfile.gettempdir())"],
                                capture_output=True, text=True, check=True).stdout.strip()
    untrusted = run_untrusted([sys.executable, "-c", "import tempfile; print(tempfile.mkdtemp())"], cwd=run.work,
                              user=None, timeout=30)
    agent_temp = os.path.dirname(os.path.realpath(untrusted.stdout_tail.strip()))
    return Scored(raw=0.0, message=Reason("placed"), details={
        "work_in_scratch": os.path.dirname(os.path.realpath(run.work)) == scratch,
        "snapshot_in_scratch": os.path.realpath(run.snapshot()).startswith(scratch + "/"),
        "temp_in_scratch": os.path.realpath(tempfile.gettempdir()) == scratch,
        "root_child_in_scratch": os.path.realpath(root_child) == scratch,
        "agent_code_in_a_private_one": agent_temp.startswith(scratch + "/rebench-untrusted-temp-")
        and not os.path.exists(agent_temp),
    })

sys.exit(main(score))
"""


def test_scoring_keeps_its_temporary_files_in_the_root_only_scratch(tmp_path):
    """Issue 21: /tmp is the agent's to fill; the work folder, the snapshot and every temporary file of the scoring
    program and of the root processes it starts go to the host's `--scratch` folder (made root-only); the agent's
    code gets a private folder of its own there as its TMPDIR, removed after it ends."""
    (tmp_path / "ws").mkdir()
    program, result, scratch = tmp_path / "score.py", tmp_path / "result.json", tmp_path / "root-only" / "scratch"
    program.write_text(SCRATCH_PROGRAM)
    command = [sys.executable, str(program), "--workspace", str(tmp_path / "ws"), "--protected", str(tmp_path),
               "--scale", "smoke", "--result", str(result), "--scratch", str(scratch)]
    environment = {key: value for key, value in os.environ.items() if key != "TMPDIR"}
    completed = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert completed.returncode == 0, completed.stderr
    details = json.loads(result.read_text())["details"]
    places = ["work_in_scratch", "snapshot_in_scratch", "temp_in_scratch", "root_child_in_scratch",
              "agent_code_in_a_private_one"]
    assert {place: details[place] for place in places} == dict.fromkeys(places, True)
    assert scratch.stat().st_mode & 0o777 == 0o711 and list(scratch.iterdir()) == []  # the work folder is gone
    # a scratch folder others may write is refused: scoring cannot run there (the host errors the sample)
    scratch.chmod(0o733)
    result.unlink()
    refused = subprocess.run(command, capture_output=True, text=True, timeout=120, env=environment)
    assert refused.returncode == 2 and not result.exists()
    assert "the scratch folder is not root's alone" in refused.stderr


def test_the_agents_code_refused_for_want_of_its_users_processes_is_invalid():
    """Issue 21: the agent can use up its user's processes (RLIMIT_NPROC) before calling `score`; the start of its
    code as that user then fails, which is its own doing: an invalid entry, not the machine's failure (an error)."""
    from rebench.sandbox_lib import Invalid, demote_to, run_untrusted
    from rebench.sandbox_lib.untrusted import NO_PROCESS_LEFT

    if os.geteuid() != 0:
        pytest.skip("needs root to switch users")
    # `nobody` holds one process, and its limit is 0: a start switched to it is over (root is exempt)
    held = subprocess.Popen(["sleep", "60"], preexec_fn=demote_to("nobody"))
    soft, hard = resource.getrlimit(resource.RLIMIT_NPROC)
    resource.setrlimit(resource.RLIMIT_NPROC, (0, hard))
    try:
        with pytest.raises(Invalid) as refused:
            run_untrusted(["/bin/true"], cwd="/", user="nobody", timeout=30)
    finally:
        resource.setrlimit(resource.RLIMIT_NPROC, (soft, hard))
        held.kill()
        held.wait()
    assert refused.value.template is NO_PROCESS_LEFT


def torch_threads_in_a_child(extra_env: dict[str, str]) -> int:
    environment = {key: value for key, value in os.environ.items() if key != "OMP_NUM_THREADS"}
    counted = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        env={**environment, **extra_env},
        capture_output=True,
        text=True,
        check=True,
    )
    return int(counted.stdout)


def test_a_child_started_with_the_scales_thread_env_runs_torch_on_one_thread_at_smoke_scale_only():
    from rebench.sandbox_lib.threads import thread_env

    assert torch_threads_in_a_child(thread_env("smoke")) == 1
    assert torch_threads_in_a_child(thread_env("full")) == torch_threads_in_a_child({})  # torch's default


def test_the_runners_sweep_walks_a_tree_nested_past_the_recursion_limit(tmp_path):
    """The quarantine's sweep looks for the runner's files over the whole filesystem: a tree the runner's code nested
    1,100 folders deep (issue 46) is walked without recursion, deepest first, and none of it is missed."""
    from rebench.sandbox_lib import isolation

    top = os.open(tmp_path, os.O_RDONLY)
    for _ in range(1100):  # relative to descriptors: os.makedirs itself recurses once per level
        os.mkdir("d", dir_fd=top)
        inner = os.open("d", os.O_RDONLY, dir_fd=top)
        os.close(top)
        top = inner
    os.close(top)
    try:
        walked = [path for path, _ in isolation._walk((str(tmp_path),))]
        assert len(walked) == 1100
        assert len(walked[0]) > len(walked[-1])  # the deepest first, so each folder is empty when it is removed
    finally:  # pytest's own clean-up of old temporary folders would meet the tree with a recursive rmtree
        subprocess.run(["rm", "-rf", str(tmp_path)], check=True)
