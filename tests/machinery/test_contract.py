"""A throwaway environment built from docs/CONTRACT.md alone: its code blocks are the environment's files."""

import importlib.util
import re
from pathlib import Path

from inspect_ai import eval

from rebench_inspect.testing.scripted import tool_call

CONTRACT = Path(__file__).resolve().parents[2] / "docs" / "CONTRACT.md"


def contract_files() -> dict[str, str]:
    """`<!-- file: PATH -->` followed by a fenced block, for every file the contract shows."""
    text = CONTRACT.read_text()
    return dict(re.findall(r"<!-- file: (\S+) -->\n```(?:python|yaml)\n(.*?)```", text, flags=re.S))


def build_environment(folder: Path):
    for relative, content in contract_files().items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(content)
    (folder / "instructions.md").write_text(
        "Write the secret number into {workspace}/answer.txt. {budget} {score_note}"
    )
    (folder / "agent" / "workspace").mkdir(parents=True)
    (folder / "agent" / "workspace" / "answer.txt").write_text("0\n")
    (folder / "reference").mkdir()
    (folder / "reference" / "answer.txt").write_text("7\n")
    spec = importlib.util.spec_from_file_location("toy_contract_task", folder / "task.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.ENVIRONMENT = module.ENVIRONMENT.model_copy(update={"location": folder})
    return module


def test_the_contract_shows_every_file_it_names():
    assert set(contract_files()) == {
        "__init__.py",
        "task.py",
        "eval.yaml",
        "sandbox/__init__.py",
        "sandbox/score.py",
        "sandbox/prepare.py",
    }


def test_an_environment_written_from_the_contract_runs_end_to_end(tmp_path, agent_script, monkeypatch):
    monkeypatch.setenv("REBENCH_CACHE_DIR", str(tmp_path / "cache"))
    module = build_environment(tmp_path / "toy_contract")
    task = module.toy_contract(scale="smoke", sandbox="local", time_budget_hours=0.1, bonus=1)
    model = agent_script(
        [
            tool_call("bash", command="cat hint.txt && echo 7 > answer.txt && echo x > a.log"),
            tool_call("score"),
        ]
    )
    [log] = eval(task, model=model, display="none", log_dir=None)
    assert log.status == "success", log.error
    entries = log.samples[0].scores["rebench_scorer"].metadata["score_log"]
    assert [(e["label"], e["raw"]) for e in entries] == [("start", 0.0), ("agent", 1.0), ("final", 1.0)]
    # details are the scorer's own numbers and booleans; the ignored a.log is not a skipped file
    assert entries[1]["details"] == {"exact": True, "snapshot_skipped_files": False}
    assert log.samples[0].scores["rebench_scorer"].value["normalised"] == 1.0
    # the task's version is the one its eval.yaml declares (the register's N-X)
    assert (log.eval.task_version, log.eval.metadata["full_task_version"]) == (1, "1-A")
