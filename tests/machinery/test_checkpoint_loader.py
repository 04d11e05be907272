"""The untrusted-checkpoint loader: weights only, in a process of its own (as the agent user when there is one),
memory-capped and time-limited; every bad input ends as an invalid verdict, never a crash, a hang or a leftover."""

import io
import os
import shutil
import tempfile
import time
import zipfile
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rebench.sandbox_lib import Invalid, ScoringRun, checkpoint_rules, load_untrusted_checkpoint  # noqa: E402
from rebench.sandbox_lib.processes import descendants  # noqa: E402
from rebench.sandbox_lib.result import ScoringArgs  # noqa: E402


class Tiny(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(8, 4)
        self.head = torch.nn.Linear(4, 8, bias=False)
        self.head.weight = self.embed.weight


RULES = checkpoint_rules(Tiny(), label="model.pt", tied=(("embed.weight", "head.weight"),))


def scoring_run(root: Path, run_as: str | None = None) -> ScoringRun:
    work = Path(tempfile.mkdtemp(prefix="loader-work-", dir=root))
    os.chmod(work, 0o711)
    args = ScoringArgs(root / "ws", root / "protected", "smoke", root / "result.json", run_as)
    return ScoringRun(args, work)


def load(tmp_path: Path, write, **kwargs) -> dict:
    (tmp_path / "ws").mkdir(exist_ok=True)
    target = tmp_path / "ws" / "model.pt"
    if target.exists() or target.is_symlink():
        target.unlink()
    write(target)
    before = set(descendants())
    try:
        return load_untrusted_checkpoint(scoring_run(tmp_path), target, RULES, timeout=kwargs.pop("timeout", 60),
                                         **kwargs)
    finally:
        assert set(descendants()) <= before  # no process left behind, whatever happened


def invalid(tmp_path: Path, write, **kwargs) -> str:
    with pytest.raises(Invalid) as error:
        load(tmp_path, write, **kwargs)
    return str(error.value)


def test_a_good_state_dict_is_loaded_and_checked(tmp_path):
    model = Tiny()
    state = load(tmp_path, lambda path: torch.save({"model": model.state_dict()}, path))
    assert set(state) == {"embed.weight", "head.weight"}
    assert torch.equal(state["embed.weight"], model.embed.weight)


def test_a_symlinked_checkpoint_is_rejected_because_it_is_a_link(tmp_path):
    good = tmp_path / "elsewhere.pt"
    torch.save(Tiny().state_dict(), good)  # a perfectly valid checkpoint: only the link is wrong
    assert "symbolic link" in invalid(tmp_path, lambda path: path.symlink_to(good))


def test_a_named_pipe_is_invalid_at_once_and_blocks_nothing(tmp_path):
    started = time.monotonic()
    assert "not a regular file" in invalid(tmp_path, os.mkfifo)
    assert time.monotonic() - started < 30


def test_compressed_entries_are_refused_as_possible_decompression_bombs(tmp_path):
    buffer = io.BytesIO()
    torch.save(Tiny().state_dict(), buffer)
    buffer.seek(0)

    def write(path: Path) -> None:
        with zipfile.ZipFile(buffer) as source, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bomb:
            for entry in source.infolist():
                bomb.writestr(entry.filename, source.read(entry))
            bomb.writestr(f"{source.namelist()[0].split('/')[0]}/padding", b"\0" * 50_000_000)

    assert "compressed" in invalid(tmp_path, write)


def test_the_loader_runs_under_a_memory_cap(tmp_path):
    """A cap too small for the loading process makes an invalid verdict, not an out-of-memory scorer."""
    message = invalid(tmp_path, lambda path: torch.save(Tiny().state_dict(), path), memory_limit=64 * 1024**2)
    assert "loading model.pt failed" in message and "64 MiB" in message


def test_pickled_code_and_wrong_shapes_are_invalid_with_their_reason(tmp_path):
    class RunsCode:
        def __reduce__(self):
            return (os.system, (f"touch {tmp_path / 'ran'}",))

    assert "weights only" in invalid(tmp_path, lambda path: torch.save({"x": RunsCode()}, path))
    assert not (tmp_path / "ran").exists()
    wrong = {"embed.weight": torch.zeros(9, 4), "head.weight": torch.zeros(9, 4)}
    assert "shape" in invalid(tmp_path, lambda path: torch.save(wrong, path))
    untied = {"embed.weight": torch.zeros(8, 4), "head.weight": torch.ones(8, 4)}
    assert "tied" in invalid(tmp_path, lambda path: torch.save(untied, path))
    nan = {"embed.weight": torch.full((8, 4), float("nan")), "head.weight": torch.full((8, 4), float("nan"))}
    assert "NaN" in invalid(tmp_path, lambda path: torch.save(nan, path))


def test_the_agent_users_permissions_apply(tmp_path, second_user):
    """As the agent user the loader cannot read what that user cannot: a root-only file is invalid, not loaded."""
    user = second_user
    root = Path(tempfile.mkdtemp(prefix="loader-runas-"))
    try:
        os.chmod(root, 0o755)
        (root / "ws").mkdir(mode=0o755)
        checkpoint = root / "ws" / "model.pt"
        torch.save(Tiny().state_dict(), checkpoint)
        run = scoring_run(root, run_as=user)
        os.chmod(checkpoint, 0o644)
        assert set(load_untrusted_checkpoint(run, checkpoint, RULES, timeout=60)) == {"embed.weight", "head.weight"}
        os.chmod(checkpoint, 0o600)  # root's own file: the scorer could read it, the agent user cannot
        with pytest.raises(Invalid, match="cannot be read by the agent's user"):
            load_untrusted_checkpoint(run, checkpoint, RULES, timeout=60)
    finally:
        shutil.rmtree(root, ignore_errors=True)
