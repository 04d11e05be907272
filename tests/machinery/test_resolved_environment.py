"""What the scale decides, pinned for every discovered environment at both scales: score metadata (anchors and their
provenance, built-in and calibrated), the scoring and preparation commands, the staged tree and starting workspace,
the generated compose and k8s values, the task's instructions and limits. The expected values were computed by the
code before the scale was resolved once per run (`EnvironmentSpec.at`), so that change provably changed none of them.

Regenerate only for an intended change, saying why in the commit:
`python -m tests.machinery.test_resolved_environment`.
"""

import hashlib
import json
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.runtime.sandbox import compose, k8s_values, processes_per_user
from rebench_inspect.runtime.scoring import anchors_metadata, final_score
from rebench_inspect.runtime.staging import prepare_command, scoring_command, staged_tree, workspace_files
from rebench_inspect.spec.environment import SCALES
from rebench_inspect.spec.normalise import score_entry

EXPECTED = Path(__file__).with_name("resolved_environments.json")
REPOSITORY = Path(__file__).resolve().parents[2]
CASES = [(name, scale) for name in sorted(ENVIRONMENTS) for scale in SCALES]
CALIBRATION_FILE = "calibration.json"
# finetune_target binds its full-scale judge role when its task is built, which needs the provider's key to exist.
JUDGE_KEY = {"OPENROUTER_API_KEY": "unused"}


def _relative(path: Path) -> str:
    return str(path.resolve().relative_to(REPOSITORY))


def _calibration_document(name: str, scale: str) -> dict:
    """An anchors file as `rebench calibrate` writes it, with fixed values (its date and hardware included)."""
    return {
        "kind": "rebench-anchors",
        "environment": name,
        "scale": scale,
        "date": "2026-12-02T00:00:00+00:00",
        "hardware": {"gpu": ["H200"]},
        "replaces_built_in_anchors": True,
        "anchors": {"start": 7.25, "reference": 3.5},
    }


def observed(name: str, scale: str, folder: Path) -> dict:
    """Everything pinned for one environment at one scale (paths inside `folder` written as `<tmp>`)."""
    spec = ENVIRONMENTS[name]
    environment = spec.at(scale)
    calibration = folder / CALIBRATION_FILE
    calibration.write_text(json.dumps(_calibration_document(name, scale)))
    calibrated = spec.at(scale, str(calibration))
    calibrated_task = TASKS[name](scale=scale, sandbox="local", anchors=str(calibration))
    task = TASKS[name](scale=scale, sandbox="local")
    entries = [
        score_entry(
            environment,
            index=index,
            label=label,
            wall_time_s=float(index),
            working_time_s=None,
            valid=True,
            raw=raw,
            message="",
        )
        for index, (label, raw) in enumerate(
            [("start", spec.anchors[scale].start), ("final", spec.anchors[scale].reference)]
        )
    ]
    final = final_score(entries, environment).metadata or {}
    paths = {"python": "python3", "code_dir": "/p/code", "workspace": "/ws", "protected": "/p"}
    scoring = scoring_command(environment, **paths, result="/p/r.json", run_as="agent", scratch="/s")
    prepare = prepare_command(environment, **paths, setup=True)
    text = json.dumps(
        {
            "anchors": anchors_metadata(environment),
            "calibrated_anchors": anchors_metadata(calibrated),
            "final_score": {key: value for key, value in final.items() if key != "score_log"},
            "entries": [entry.model_dump() for entry in entries],
            "scoring_command": scoring,
            "prepare_command": prepare,
            "staged_tree": {relative: _relative(source) for relative, source in staged_tree(spec).items()},
            "workspace_files": {
                relative: _relative(source) for relative, source in workspace_files(environment).items()
            },
            "compose": compose(environment),
            "k8s_values": k8s_values(environment),
            "processes_per_user": processes_per_user(environment),
            "instructions_sha256": hashlib.sha256(str(task.dataset[0].input).encode()).hexdigest(),
            "task_metadata": task.metadata,
            "time_limit": task.time_limit,
            "working_limit": task.working_limit,
            "calibrated_task_input_sha256": hashlib.sha256(str(calibrated_task.dataset[0].input).encode()).hexdigest(),
        },
        sort_keys=True,
    )
    return json.loads(text.replace(str(folder), "<tmp>"))


@pytest.mark.parametrize(("name", "scale"), CASES)
def test_what_the_scale_decides_is_unchanged(name, scale, tmp_path, monkeypatch):
    for variable, value in JUDGE_KEY.items():
        monkeypatch.setenv(variable, value)
    expected = json.loads(EXPECTED.read_text())[f"{name}/{scale}"]
    assert observed(name, scale, tmp_path) == expected


def test_the_pinned_values_cover_every_environment_at_both_scales():
    assert set(json.loads(EXPECTED.read_text())) == {f"{name}/{scale}" for name, scale in CASES}


def test_an_unknown_scale_is_refused(toy_environment):
    with pytest.raises(ValueError, match="scale must be smoke or full, not 'medium'"):
        toy_environment.at("medium")


if __name__ == "__main__":
    import os
    import tempfile

    os.environ.update(JUDGE_KEY)
    with tempfile.TemporaryDirectory() as scratch:
        values = {f"{name}/{scale}": observed(name, scale, Path(scratch)) for name, scale in CASES}
    EXPECTED.write_text(json.dumps(values, indent=1, sort_keys=True) + "\n")
