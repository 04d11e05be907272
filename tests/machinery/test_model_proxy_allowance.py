"""A model-role proxy's scoring allowance (`ModelRoleProxy.scoring_budget_usd`): each scoring run has its own, in
dollars; a call past it is refused and counted in the run and in the sample's ledger. (finetune_target's judge counts
its allowance in calls instead: tests/finetune_target/test_judge.py.)"""

import pytest

from rebench_inspect.runtime.model_proxy import BudgetExhausted, ModelRoleProxy, PriceTable, _Run, read_ledger

PRICES = PriceTable({"m": (1.0, 1.0)}, fallback_model="m")


def test_each_scoring_run_has_its_own_allowance_in_dollars():
    proxy = ModelRoleProxy(role="helper", prices=PRICES, scoring_budget_usd=0.5)
    first = _Run(purpose="scoring", port=1, key="k", spent_usd=0.49)
    proxy._check_run(first)  # under the allowance: admitted
    first.spent_usd = 0.5
    with pytest.raises(BudgetExhausted, match=r"scoring API budget for this scoring run is exhausted: \$0.5000 of"):
        proxy._check_run(first)
    assert first.refused == 1 and read_ledger("helper")["scoring"]["refused"] == 1
    proxy._check_run(_Run(purpose="scoring", port=2, key="k2"))  # a new scoring run, a new allowance
    proxy._check_run(_Run(purpose="agent", port=3, key="k3", spent_usd=10.0))  # agent calls: the sample's budget


def test_without_a_scoring_allowance_scoring_calls_are_never_refused_per_run():
    proxy = ModelRoleProxy(role="helper", prices=PRICES)
    proxy._check_run(_Run(purpose="scoring", port=1, key="k", spent_usd=1e6))
