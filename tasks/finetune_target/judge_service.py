"""The judge as a harness service, built on `rebench_inspect.runtime.model_proxy.ModelRoleProxy`.

`JudgeProxy` is the model-role proxy for the `judge` role with a budget counted in judge *calls* (the agent's
`evaluation.py` gets a fixed number of comparisons, whatever the judge model costs). Each scoring run has its own
allowance of judge calls (`scoring_call_budget`, per run; the task sets it to a multiple of what the held-out set
needs), so no process left behind by the agent can make judge calls that no budget counts. Every call is a
`model` event of role `judge` in the transcript, and the ledger (`rebench:model_proxy:judge` in the sample store)
counts calls per purpose.

The agent learns the endpoint from `<workspace>/judge_api.env`; scoring runs learn the judge model from
`REBENCH_JUDGE_MODEL`.

`env_service(...)` is a tiny service that only adds environment variables for the scoring program (used to keep
the best submission and to re-score it on the second held-out set).
"""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from inspect_ai.util import sandbox, store

from rebench_inspect import ModelRoleProxy, PriceTable, ledger_key

JUDGE_ROLE = "judge"
JUDGE_ENV_FILE = "judge_api.env"
# The budget counts judge calls; dollars are only reported in the ledger, at these prices where Inspect's model
# database has none.
JUDGE_PRICES = PriceTable({"gpt-3.5-turbo-0125": (0.50, 1.50)}, fallback_model="gpt-3.5-turbo-0125")


class JudgeBudgetExhausted(RuntimeError):
    pass


class JudgeProxy(ModelRoleProxy):
    """The `judge` role behind an OpenAI-compatible endpoint, with a budget of judge calls for the agent."""

    def __init__(self, default_model: str | None, call_budget: int, scoring_call_budget: int | None = None) -> None:
        if call_budget < 0:
            raise ValueError("the judge call budget must be >= 0")
        super().__init__(
            role=JUDGE_ROLE,
            prices=JUDGE_PRICES,
            default_model=default_model,
            budget_usd=float("inf"),
            env_file_name=JUDGE_ENV_FILE,
        )
        self.call_budget = int(call_budget)
        self.scoring_call_budget = scoring_call_budget

    def _run_allowance_spent(self, run: Any) -> Exception | None:
        """A scoring run's allowance counts judge calls, not dollars."""
        limit = self.scoring_call_budget
        if limit is None or run.requests < limit:
            return None
        return JudgeBudgetExhausted(
            f"The scoring judge call budget of this scoring run is exhausted: all {limit} judge calls have been used. "
            "Further judge calls are refused."
        )

    def check(self, purpose: str) -> None:  # type: ignore[override]
        """Count the call before it is made; refuse an agent call (HTTP 400, this message) once its budget is spent."""
        ledger = self._ledger()
        account = ledger[purpose]
        used = int(account.get("requests", 0))
        if purpose == "agent" and used >= self.call_budget:
            account["refused"] += 1
            store().set(ledger_key(self.role), ledger)
            raise JudgeBudgetExhausted(
                f"The judge call budget is exhausted: all {self.call_budget} judge calls have been used. Further judge "
                "calls are refused; the run goes on (your score tool still works)."
            )
        account["requests"] = used + 1
        ledger["call_budget"] = {"agent": self.call_budget, "scoring": self.scoring_call_budget}
        store().set(ledger_key(self.role), ledger)

    async def _announce(self, layout: Any, env: dict[str, str]) -> None:
        workspace = getattr(layout, "workspace", None)
        if not workspace:
            return
        body = (
            f"# The judge's OpenAI-compatible endpoint (budget: {self.call_budget} judge calls for this run).\n"
            + "".join(f"{k}={v}\n" for k, v in env.items() if k != self.model_variable)
        )
        path = f"{workspace}/{self.env_file_name}"
        await sandbox().write_file(path, body)
        user = getattr(layout, "agent_user", None)
        if user:
            await sandbox().exec(["chown", f"{user}:{user}", path])


def judge_ledger() -> dict | None:
    return store().get(ledger_key(JUDGE_ROLE))


def env_service(variables: dict[str, str]):
    """A service that adds `variables` to the scoring program's environment."""

    @asynccontextmanager
    async def service(layout: Any, purpose: str) -> AsyncIterator[dict[str, str]]:
        yield dict(variables)

    return service
