"""The contract's per-environment rules (docs/CONTRACT.md), checked for every discovered environment: no hand list
to keep, so a new environment is checked the day its folder appears."""

import ast
from pathlib import Path

import pytest

from rebench.environments import ENVIRONMENTS, TASKS
from rebench_inspect.spec.environment import SCALES

NAMES = sorted(ENVIRONMENTS)


def score_constant(environment, name: str):
    """A literal constant of the environment's sandbox/score.py, read without importing it (None: not declared)."""
    tree = ast.parse((environment.sandbox_dir / "score.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == name for t in node.targets):
            return ast.literal_eval(node.value)
    return None


@pytest.mark.parametrize("name", NAMES)
def test_step_limits_are_declared_and_fit_inside_the_hosts(name):
    environment = ENVIRONMENTS[name]
    limits = score_constant(environment, "TIMEOUTS_S")
    assert limits is not None, f"{name}/sandbox/score.py declares no TIMEOUTS_S"
    assert sorted(limits) == sorted(SCALES), "TIMEOUTS_S declares both scales"
    repeated = set(score_constant(environment, "REPEATED_STEPS") or ())
    for scale, steps in limits.items():
        host = environment.scoring_timeout_s[scale]
        assert repeated <= set(steps), (scale, repeated - set(steps))
        assert sum(s for step, s in steps.items() if step not in repeated) <= host, (scale, steps, host)
        assert all(steps[step] <= host for step in repeated), (scale, steps, host)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize("name", NAMES)
def test_instructions_render_at_both_scales_with_the_default_run_fields(name, scale, monkeypatch):
    # A provider's key is needed to bind a full-scale default role model when the task is built, never used here.
    monkeypatch.setenv("OPENROUTER_API_KEY", "unused")
    task = TASKS[name](scale=scale, sandbox="local")
    [sample] = list(task.dataset)
    assert isinstance(sample.input, str) and "/home/agent/workspace" in sample.input


README_HEADINGS = (
    "What the agent does",
    "Scoring and validity",
    "Anchors and where they come from",
    "Parameters",
    "Smoke and full scale",
    "Security",
    "Evaluation validity",
    "Fidelity",
    "Measured times",
    "Changelog",
)


@pytest.mark.parametrize("name", NAMES)
def test_every_environment_has_a_readme_with_the_same_headings_and_the_top_readme_links_it(name):
    readme = ENVIRONMENTS[name].folder / "README.md"
    assert readme.is_file(), f"tasks/{name}/README.md is missing"
    headings = [line[3:].strip() for line in readme.read_text().splitlines() if line.startswith("## ")]
    assert headings == list(README_HEADINGS), f"tasks/{name}/README.md: sections {headings}"
    top = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert f"(tasks/{name}/README.md)" in top, f"the top README does not link tasks/{name}/README.md"
