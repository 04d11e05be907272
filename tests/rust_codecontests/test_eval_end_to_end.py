"""Inspect end to end on the local sandbox: mockllm as the agent, the offline smoke model (or mockllm) as the
`scaffold` role behind the budgeted model proxy (Inspect's sandbox agent bridge)."""

import shutil
import sys
import textwrap
from types import SimpleNamespace

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.model import get_model
from inspect_ai.scorer import Score, Target, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox, store

from rebench.rust_codecontests.smoke_model import scaffold_custom_outputs
from rebench.rust_codecontests.task import SCAFFOLD_PRICES
from rebench_inspect.runtime.model_proxy import ModelRoleProxy, read_ledger
from rebench_inspect.testing.fixtures import scored_sample
from rebench_inspect.testing.scripted import scripted_agent, tool_call

from .conftest import REFERENCE_SOLUTION

# Slow tier (`pytest -m slow`, run by CI): end-to-end evals with the model proxy and rustc.
pytestmark = pytest.mark.slow

CLIENT_SCRIPT = textwrap.dedent(
    """
    import os, sys
    import openai
    env = dict(line.split("=", 1) for line in open(sys.argv[1]).read().splitlines() if "=" in line and not line.startswith("#"))
    stranger = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key="guessed", max_retries=5)
    try:  # a caller without the key (in the header the harness's clients send) is refused
        stranger.chat.completions.create(model="x", messages=[{"role": "user", "content": "Sum of Pairs"}])
        print("STRANGER SERVED")
    except openai.BadRequestError as e:
        print("STRANGER REFUSED", "key" in str(e))
    client = openai.OpenAI(base_url=env["OPENAI_BASE_URL"], api_key=env["OPENAI_API_KEY"], max_retries=5,
                           default_headers={"X-Rebench-Proxy-Key": env["REBENCH_PROXY_KEY"]})
    for i in range(3):
        try:
            r = client.chat.completions.create(model="gpt-3.5-turbo-0125", n=2,
                messages=[{"role": "user", "content": "Sum of Pairs: solve it in Rust"}])
            print("OK", len(r.choices), "fn main" in (r.choices[0].message.content or ""))
        except openai.BadRequestError as e:
            print("REFUSED", e)
    """
)


@solver
def call_scaffold_through_proxy(budget_usd: float, role_model: str):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        home = (await sandbox().exec(["pwd"])).stdout.strip()
        await sandbox().exec(["mkdir", "-p", f"{home}/workspace"])
        layout = SimpleNamespace(workspace=f"{home}/workspace", is_container=False, agent_user=None)
        proxy = ModelRoleProxy(role="scaffold", prices=SCAFFOLD_PRICES, default_model=role_model, budget_usd=budget_usd)
        await sandbox().write_file(f"{home}/client.py", CLIENT_SCRIPT)
        import sys

        async with proxy(layout, purpose="agent"):
            result = await sandbox().exec([sys.executable, f"{home}/client.py", f"{home}/workspace/model_api.env"],
                                          timeout=120)
        store().set("client_output", result.stdout + result.stderr)
        return state

    return solve


@scorer(metrics=[])
def ledger_scorer():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=0, metadata={"ledger": read_ledger("scaffold"), "client": store().get("client_output")})

    return score


def _proxy_task(budget_usd: float, role_model: str = "rebench_smoke/scaffold") -> Task:
    return Task(dataset=[Sample(input="x")], solver=call_scaffold_through_proxy(budget_usd, role_model),
                scorer=ledger_scorer(), sandbox="local")


def test_proxy_routes_to_the_role_and_enforces_the_budget():
    # One smoke call costs ~1e-5 $ at the fallback price: the first call passes, the next ones are refused.
    [log] = eval(_proxy_task(budget_usd=1e-6), model="mockllm/model", display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    client = sample.scores["ledger_scorer"].metadata["client"]
    lines = client.strip().splitlines()
    assert lines[0] == "STRANGER REFUSED True", client
    assert lines[1] == "OK 2 True", client  # n=2 forwarded, answered by the smoke model, not the agent's model
    assert all(line.startswith("REFUSED") for line in lines[2:4]), client
    assert "budget is exhausted" in client
    ledger = sample.scores["ledger_scorer"].metadata["ledger"]
    assert ledger["agent"]["calls"] == 1 and ledger["agent"]["refused"] == 2
    assert ledger["unauthorised"]["agent"] == 1
    assert ledger["price"]["source"].startswith("token-count fallback")
    assert "scaffold" in log.stats.role_usage
    assert log.stats.role_usage["scaffold"].output_tokens > 0


def test_proxy_with_a_generous_budget_never_refuses():
    [log] = eval(_proxy_task(budget_usd=500.0), model="mockllm/model", display="none", log_dir=None)
    [sample] = log.samples
    client = sample.scores["ledger_scorer"].metadata["client"]
    assert client.count("OK 2 True") == 3, client


def test_mockllm_can_play_the_scaffold_role():
    scaffold = get_model("mockllm/model", custom_outputs=scaffold_custom_outputs)
    task = Task(dataset=[Sample(input="x")], solver=call_scaffold_through_proxy(500.0, "rebench_smoke/scaffold"),
                scorer=ledger_scorer(), sandbox="local", model_roles={"scaffold": scaffold})
    [log] = eval(task, model="mockllm/model", display="none", log_dir=None)
    [sample] = log.samples
    client = sample.scores["ledger_scorer"].metadata["client"]
    assert "OK" in client and "True" in client, client


@pytest.mark.skipif(shutil.which("rustc") is None, reason="needs rustc")
def test_full_task_start_then_reference_with_mockllm_agent(environment, smoke_eval):
    agent = scripted_agent(
        [
            tool_call("bash", command=f"cat model_api.env && {sys.executable} validate.py"),
            tool_call("bash", command=f"cp {REFERENCE_SOLUTION} solution.py"),
            tool_call("score"),
        ]
    )
    log = smoke_eval(environment, agent)
    sample, score = scored_sample(log)
    entries = score.metadata["score_log"]  # start 0, reference 0.75 as anchored: tests/contract/test_end_to_end.py
    # the scaffold role's usage (scoring runs through the proxy) is in the log, apart from the agent's
    assert log.stats.role_usage["scaffold"].input_tokens > 0
    assert "mockllm/model" in log.stats.model_usage
    assert log.eval.model_roles["scaffold"].model == "rebench_smoke/scaffold"
    # the agent's validation run reached the scaffold through its own bridge (model_api.env) and its budget
    validation = [m.text for m in sample.messages if m.role == "tool"][0]
    assert "OPENAI_BASE_URL=http://localhost:" in validation, validation
    assert "solved 0/2" in validation, validation  # the paper's start: the model's prose does not compile
    ledger = sample.store["rebench:model_proxy:scaffold"]
    assert ledger["agent"]["calls"] == 2 and ledger["agent"]["spent_usd"] > 0
    assert ledger["scoring"]["calls"] > ledger["agent"]["calls"]
    # each scoring run had its own door and account, and every completion it served was recorded for it
    runs = ledger["scoring_runs"]
    assert len(runs) == 3 and all(r["unauthorised"] == 0 and r["refused"] == 0 for r in runs)
    assert all(r["responses_recorded"] == r["calls"] > 0 for r in runs)
    assert [p["from_model"] for p in entries[1]["details"]["problems"]] == [True] * 8


@pytest.mark.skipif(shutil.which("rustc") is None, reason="needs rustc")
def test_full_task_with_spent_budget_refuses_the_agents_calls_and_goes_on(environment, smoke_eval):
    agent = scripted_agent([tool_call("bash", command=f"{sys.executable} validate.py")])
    sample, score = scored_sample(smoke_eval(environment, agent, api_budget_usd=0))
    validation = [m.text for m in sample.messages if m.role == "tool"][0]
    assert "budget is exhausted" in validation, validation
    assert "solved 0/2" in validation
    ledger = sample.store["rebench:model_proxy:scaffold"]
    assert ledger["agent"]["calls"] == 0 and ledger["agent"]["refused"] >= 2
    # scoring has its own allowance: the start and final entries are valid and unchanged
    assert [e["raw"] for e in score.metadata["score_log"]] == [0.0, 0.0]


def test_a_squatted_port_is_an_infrastructure_error(monkeypatch):
    # Every port the proxy may draw is already held (here: the one port of a shrunken range): the sample errors,
    # it never falls back to another door or to a door someone else opened.
    import socket

    from rebench_inspect.runtime import model_proxy

    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        monkeypatch.setattr(model_proxy, "PORT_RANGE", (port, port + 1))
        [log] = eval(_proxy_task(budget_usd=1.0), model="mockllm/model", display="none", log_dir=None)
    assert log.status == "error" or log.samples[0].error is not None
    error = log.samples[0].error.message if log.samples and log.samples[0].error else log.error.message
    assert "no free port" in error


def test_listener_probe_names_who_holds_the_port():
    # Inside the sandbox the harness checks who listens on the proxy's port: only the harness's own user may.
    import os
    import socket
    import subprocess

    from rebench_inspect.runtime.model_proxy import _LISTENER_PROBE

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        out = subprocess.run([sys.executable, "-c", _LISTENER_PROBE, str(port), "5"], capture_output=True, text=True)
    assert out.stdout.split() == [str(os.getuid()), str(os.getuid())]
