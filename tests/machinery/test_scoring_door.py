"""A model-role proxy's scoring door: one bridge per sample, shared by its scoring runs (opening a bridge cost each
scoring run about a second), each run let in by a key of its own that is refused once the run ends; a door whose keys
are spent gives way to a fresh one; the sample's cleanup closes it."""

import sys
import textwrap
from types import SimpleNamespace

import pytest
from inspect_ai import Task, eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, Target, scorer
from inspect_ai.solver import Generate, TaskState, solver
from inspect_ai.util import sandbox, store

from rebench_inspect.runtime import model_proxy
from rebench_inspect.runtime.model_proxy import ModelRoleProxy, PriceTable, read_ledger
from rebench_inspect.runtime.smoke import register_smoke_model

# Offline, with usage estimated from the text (mockllm counts tokens with tiktoken, which downloads its tables).
ECHO_MODEL = register_smoke_model("door_echo", lambda prompt, n: [prompt] * n)

CLIENT = textwrap.dedent(
    """
    import sys
    import openai
    base_url, keys = sys.argv[1], sys.argv[2:]
    for key in keys:  # one verdict per key
        client = openai.OpenAI(base_url=base_url, api_key=key, max_retries=0,
                               default_headers={"X-Rebench-Proxy-Key": key})
        try:
            client.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}])
            print("SERVED")
        except openai.BadRequestError as e:
            print("REFUSED" if "key" in str(e) else f"OTHER {e}")
        except Exception as e:
            print(f"ERROR {type(e).__name__}")
    """
)


@solver
def scoring_runs(proxy: ModelRoleProxy, runs: int):
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        home = (await sandbox().exec(["pwd"])).stdout.strip()
        await sandbox().exec(["mkdir", "-p", f"{home}/workspace", f"{home}/protected"])
        layout = SimpleNamespace(
            workspace=f"{home}/workspace", protected=f"{home}/protected", is_container=False, agent_user=None
        )
        await sandbox().write_file(f"{home}/client.py", CLIENT)

        async def call(env: dict[str, str], *keys: str) -> list[str]:
            command = [sys.executable, f"{home}/client.py", env["OPENAI_BASE_URL"], *keys]
            result = await sandbox().exec(command, timeout=60)
            return result.stdout.split("\n")[: len(keys)] if result.success else [result.stderr[-300:]]

        seen: list[dict] = []
        for _ in range(runs):
            async with proxy(layout, "scoring") as env:
                key = env["REBENCH_PROXY_KEY"]
                # the previous run's key, then this run's
                *earlier, own = await call(env, *[run["key"] for run in seen[-1:]], key)
                seen.append({"key": key, "port": env["OPENAI_BASE_URL"], "own": own, "earlier": earlier})
            # between runs the door may stay open: the run's key is refused there now
            [seen[-1]["after"]] = await call(env, key)
        store().set("runs", seen)
        return state

    return solve


@scorer(metrics=[])
def ledger():
    async def score(state: TaskState, target: Target) -> Score:
        return Score(value=0, metadata={"ledger": read_ledger("helper"), "runs": store().get("runs")})

    return score


@pytest.fixture
def openings(monkeypatch):
    """Counts the bridges the proxy opens and closes."""
    counts = {"opened": 0, "closed": 0}
    bridge = model_proxy.sandbox_agent_bridge

    def counted(*args, **kwargs):
        opening = bridge(*args, **kwargs)

        class Counted:
            async def __aenter__(self):
                counts["opened"] += 1
                return await opening.__aenter__()

            async def __aexit__(self, *exc):
                counts["closed"] += 1
                return await opening.__aexit__(*exc)

        return Counted()

    monkeypatch.setattr(model_proxy, "sandbox_agent_bridge", counted)
    return counts


def test_scoring_runs_share_a_door_each_with_its_own_key_refused_after_its_run(openings):
    proxy = ModelRoleProxy(
        role="helper", prices=PriceTable({"m": (1.0, 1.0)}, "m"), default_model=ECHO_MODEL, record_responses=True
    )
    proxy.scoring_keys_per_door = 2  # three runs: two on the first door, then a fresh one
    task = Task(
        dataset=[Sample(input="x")],
        solver=scoring_runs(proxy, runs=3),
        scorer=ledger(),
        cleanup=lambda state: proxy.close_for_sample(SimpleNamespace()),
        sandbox="local",
    )
    [log] = eval(task, model="mockllm/model", display="none", log_dir=None)
    assert log.status == "success", log.error
    [sample] = log.samples
    metadata = sample.scores["ledger"].metadata
    runs = metadata["runs"]
    assert [run["own"] for run in runs] == ["SERVED"] * 3, runs
    # each run's key opened the door only during its run, though the door stayed open after the first two
    assert [run["after"] for run in runs] == ["REFUSED"] * 3, runs
    assert [run["earlier"] for run in runs] == [[], ["REFUSED"], ["REFUSED"]], runs
    assert runs[0]["port"] == runs[1]["port"] != runs[2]["port"]
    # two bridges for three runs: the first closed when its keys were spent, the second at the sample's cleanup
    assert openings == {"opened": 2, "closed": 2}
    entries = metadata["ledger"]["scoring_runs"]
    assert [entry["calls"] for entry in entries] == [1, 1, 1]
    assert [entry["responses_recorded"] for entry in entries] == [1, 1, 1]
    assert [entry["unauthorised"] for entry in entries] == [0, 1, 1]
    assert metadata["ledger"]["unauthorised"]["scoring"] == 2 + 3  # the earlier keys, then each run's own after it
    # every call the doors served is in the transcript, in the span named for them
    spans = {event.id: event.name for event in sample.events if event.event == "span_begin"}
    calls = [event for event in sample.events if event.event == "model"]
    assert len(calls) == 3 and {spans.get(call.span_id) for call in calls} == {proxy.scoring_door_span}
