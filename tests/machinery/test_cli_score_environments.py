"""`rebench score` scores every environment's starting workspace with the services an eval's scoring run opens
(model proxies, judges) at smoke scale: without them a model- or judge-scored environment could not score at all
(rust_codecontests's scorer refuses to run without its proxy's record; finetune_target's without its judge)."""

import json

import pytest

from rebench.environments import ENVIRONMENTS
from rebench_inspect import cli
from rebench_inspect.runtime.sandbox import local_problems
from rebench_inspect.testing.fixtures import fixed_smoke_anchors


@pytest.mark.parametrize("name", sorted(ENVIRONMENTS))
def test_cli_scores_the_starting_workspace_of_every_environment(name, capsys):
    missing = local_problems(ENVIRONMENTS[name])
    if missing:  # software the images carry but this machine lacks (the message says how to install it)
        pytest.skip("; ".join(missing))
    # No workspace: the starting one, as setup lays it out. A timed environment keeps its built-in smoke anchors
    # (measuring them here would add 4-6 scoring runs: 2.5 min for optimize_llm_foundry).
    anchors = fixed_smoke_anchors(ENVIRONMENTS[name])
    assert cli.main(["score", name, "--scale", "smoke", *(["--anchors", anchors] if anchors else [])]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["environment"] == name and result["scale"] == "smoke"
    assert result["valid"] is True and result["raw"] is not None, result["message"]
    if name == "rust_codecontests":  # the scaffold model answered through the scoring proxy, and was recorded
        assert result["details"]["programs_from_model"] == result["details"]["total"] == 8
