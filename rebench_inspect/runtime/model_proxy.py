"""A budgeted, secret-bound OpenAI-compatible endpoint inside the sandbox that reaches one Inspect model role.

An environment whose agent's code or scoring program calls a model (a scaffold model, a judge) names the role and
its price table: `ModelRoleProxy(role="helper", prices=PriceTable({"toy-model-1": (1.0, 2.0)}, "toy-model-1"))`. It is
a rebench *service*: a factory `(SandboxLayout, purpose: "agent"|"scoring") -> AsyncContextManager[dict[str, str]]`
(docs/CONTRACT.md). Opened, it runs Inspect's `sandbox_agent_bridge` and yields `{"OPENAI_BASE_URL":
"http://localhost:<port>/v1", "OPENAI_API_KEY": <key>, "REBENCH_PROXY_KEY": <key>, "REBENCH_<ROLE>_MODEL": <the role's
model>}` (`REBENCH_HELPER_MODEL` here) for the scoring program's environment.

A closed door (threat model: any process in the sandbox may try to call it, or to answer in its place):
- a door is one bridge on a fresh random port: the agent's, open from setup to cleanup, and a sample's scoring
  door, opened at its first scoring run and shared by all of them (opening a bridge costs about a second: Inspect
  starts its sandbox tools' proxy, and stops it at closing), closed at the sample's cleanup;
- every run (the agent's, each scoring run) gets a fresh random key; a request is served only when it carries the
  key of a run open on that door, in the `X-Rebench-Proxy-Key` header (the harness's clients send their API key
  there): a scoring run's key is refused from the moment its run ends. The key of a scoring run goes only to the
  scoring program's environment, the agent's key only to `<workspace>/model_api.env`;
- once open, the harness checks inside the sandbox that whoever listens on the port is the bridge's own user (not
  a process that bound the port first, e.g. the agent's); a port it cannot bind or that someone else holds is an
  infrastructure error (the sample errors), never a silent fallback;
- with `record_responses`, every completion a scoring run served is written to a root-only folder of the protected
  directory (`$REBENCH_MODEL_RESPONSES_DIR`, one JSON list of texts per call), so the scoring program can tell
  which returned programs came from the model.

A scoring door's model calls appear in the transcript in one span, "<role> model: scoring runs' calls", opened
inside the first scoring run, not under each run's own: the bridge serves them from the task that holds the door
open. Each run's own account is in the ledger.

Routing: every request, whatever model name it asks for (including "inspect"), goes to
`get_model(role=role, default=default_model)`; with no default the role is required. It never falls back to the
model under evaluation. Client generation parameters (`n`, `temperature`, `max_tokens`) are forwarded.

Budgets: the agent's budget is a dollar amount (default 500, the paper's "$500 of API credits") over the whole
sample; each scoring run has its own allowance (`scoring_budget_usd`, per run: the environment sets it to a
documented multiple of what its held-out set needs). Each call is priced from the role model's token prices:
Inspect's model database when it has them, else the proxy's price table, else (token-count fallback) at the prices of
the table's fallback model. Once an allowance is spent, further calls fail with HTTP 400 and a message saying the
budget is exhausted; the run goes on. Calls in flight when the limit is crossed still complete, so the overshoot is at
most one round of concurrent calls. **Scoring does not draw on the agent's budget** (the paper's budget pays for the
agent's experiments).

The ledger lives in the sample's Inspect store (key `rebench:model_proxy:<role>`): totals per purpose, refused and
unauthorised calls, and one record per scoring run.
"""

import json
import re
import secrets
import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal
from weakref import WeakKeyDictionary

import anyio
from inspect_ai.agent import sandbox_agent_bridge
from inspect_ai.model import (
    GenerateConfig,
    GenerateInput,
    Model,
    ModelOutput,
    get_model,
    get_model_info,
)
from inspect_ai.util import SandboxEnvironment, sandbox, span, store

from .held import HeldContext

Purpose = Literal["agent", "scoring"]

# Random ports are drawn from here (above the usual services, below the kernel's ephemeral range).
PORT_RANGE = (20000, 32000)
ENV_FILE_NAME = "model_api.env"
PROXY_KEY_HEADER = "X-Rebench-Proxy-Key"
RESPONSES_DIR_VARIABLE = "REBENCH_MODEL_RESPONSES_DIR"
DEFAULT_BUDGET_USD = 500.0
LISTEN_CHECK_TIMEOUT_S = 30
# A sample's scoring runs share one door (opening a bridge costs a scoring run about a second): this many runs, each
# with a key of its own, then a fresh door.
SCORING_KEYS_PER_DOOR = 256

_BRIDGES_OPENING = anyio.Lock()


@asynccontextmanager
async def one_opening_at_a_time(bridge: AbstractAsyncContextManager[Any]) -> AsyncIterator[Any]:
    """Enter `bridge` while no other bridge of this process is being entered; its life is not serialised.

    Opening the first bridge installs Inspect's sandbox tools, which Inspect locks per sandbox object: the local
    sandboxes of concurrent samples share one host folder for the tools, so two first openings extracted over each
    other and one could not start them ("Text file busy": on a fresh machine, `rebench demo` lost an environment
    that opens a proxy)."""
    async with AsyncExitStack() as scope:
        async with _BRIDGES_OPENING:
            opened = await scope.enter_async_context(bridge)
        yield opened


# Run inside the sandbox (as the harness's user): wait until something listens on the port, then print this
# process's uid and the uids owning each listening socket on it (from /proc/net/tcp and tcp6).
_LISTENER_PROBE = """
import os, sys, time
port = int(sys.argv[1]); deadline = time.time() + float(sys.argv[2]); owners = set()
while time.time() < deadline:
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            rows = open(table).read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 7 and f[3] == "0A" and int(f[1].rsplit(":", 1)[1], 16) == port:
                owners.add(int(f[7]))
    if owners:
        break
    time.sleep(0.2)
print(os.getuid(), *sorted(owners))
"""


def _box(layout: Any) -> SandboxEnvironment:
    """The sandbox the layout describes: the scoring service for a scoring run apart from the agent."""
    return sandbox(getattr(layout, "sandbox_name", None))


class ProxyUnavailable(RuntimeError):
    """The proxy could not be opened as a closed door (port not bound, or held by someone else)."""


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    source: str

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_mtok + output_tokens * self.output_per_mtok) / 1e6


@dataclass(frozen=True)
class PriceTable:
    """Public list prices ($ per million input and output tokens) for the models a role is expected to use that
    Inspect's model database lacks, keyed by model name without its provider; any other model is charged at the
    prices of `fallback_model` (the token-count fallback)."""

    prices: Mapping[str, tuple[float, float]]
    fallback_model: str

    def __post_init__(self) -> None:
        if self.fallback_model not in self.prices:
            raise ValueError(f"the fallback model {self.fallback_model} has no prices in the table")

    @property
    def fallback(self) -> Price:
        note = f"token-count fallback (priced as {self.fallback_model})"
        return Price(*self.prices[self.fallback_model], source=note)

    def price_for(self, model: Model) -> Price:
        info = get_model_info(model)
        if info is not None and info.cost is not None:
            return Price(info.cost.input, info.cost.output, "inspect model database")
        name = model.api.model_name.split("/")[-1]
        if name in self.prices:
            return Price(*self.prices[name], source="rebench price table")
        return self.fallback


class BudgetExhausted(RuntimeError):
    pass


def ledger_key(role: str) -> str:
    return f"rebench:model_proxy:{role}"


def _empty_ledger(budget_usd: float, scoring_budget_usd: float | None) -> dict[str, Any]:
    return {
        "budget_usd": budget_usd,
        "scoring_budget_usd": scoring_budget_usd,
        "agent": {
            "spent_usd": 0.0,
            "calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "refused": 0,
        },
        "scoring": {
            "spent_usd": 0.0,
            "calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "refused": 0,
        },
        "unauthorised": {"agent": 0, "scoring": 0},
        "scoring_runs": [],
        "price": None,
    }


def read_ledger(role: str) -> dict[str, Any] | None:
    """The current sample's ledger for `role` (None when no proxy has been opened)."""
    return store().get(ledger_key(role))


@dataclass
class _Run:
    """One opening of the proxy: its door (port, key) and its own account."""

    purpose: Purpose
    port: int
    key: str
    spent_usd: float = 0.0
    requests: int = 0  # admitted requests (counted before the call, so calls in flight count too)
    calls: int = 0
    refused: int = 0
    unauthorised: int = 0
    responses_dir: str | None = None
    responses_written: int = 0

    def summary(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "calls": self.calls,
            "spent_usd": self.spent_usd,
            "refused": self.refused,
            "unauthorised": self.unauthorised,
            "responses_recorded": self.responses_written,
        }


@dataclass
class _Door:
    """One bridge into a sandbox on a fresh random port, and the runs it serves now, by key (`ModelRoleProxy._door`)."""

    purpose: Purpose
    port: int
    keys: list[str]  # drawn when it opens, one per run it can serve
    issued: int = 0
    runs: dict[str, _Run] = field(default_factory=dict)
    retired: bool = False  # its keys are spent: it serves its open runs, then closes
    held: HeldContext["_Door"] | None = None  # the task that holds a scoring door open across a sample's scoring runs

    @property
    def spent(self) -> bool:
        return self.issued >= len(self.keys)

    def issue_key(self) -> str:
        if self.spent:
            raise ProxyUnavailable("the model proxy's door has issued all its keys")
        self.issued += 1
        return self.keys[self.issued - 1]


# The run whose key let the request in, set by the door's filter for its response filter (both run in the request's
# own task, one after the other).
_SERVING: ContextVar[_Run | None] = ContextVar("rebench_model_proxy_serving", default=None)


def _header(config: GenerateConfig, name: str) -> str | None:
    for key, value in (config.extra_headers or {}).items():
        if key.lower() == name.lower():
            return value
    return None


def _without_header(config: GenerateConfig, name: str) -> GenerateConfig:
    """The config minus our door's header: the key never travels on to the model provider."""
    headers = {k: v for k, v in (config.extra_headers or {}).items() if k.lower() != name.lower()}
    return config.model_copy(update={"extra_headers": headers or None})


class ModelRoleProxy:
    """Service factory: an OpenAI-compatible, budgeted, secret-bound endpoint for one model role (module docstring)."""

    def __init__(
        self,
        role: str,
        prices: PriceTable,
        default_model: str | None = None,
        budget_usd: float = DEFAULT_BUDGET_USD,
        scoring_budget_usd: float | None = None,
        env_file_name: str = ENV_FILE_NAME,
        record_responses: bool = False,
    ) -> None:
        if budget_usd < 0:
            raise ValueError("budget_usd must be >= 0")
        if not re.fullmatch(r"[a-z][a-z0-9_]*", role):
            raise ValueError(f"a model role is a lower-case identifier (it names REBENCH_<ROLE>_MODEL): {role!r}")
        self.role = role
        self.prices = prices
        # Where the scoring program (and the agent's key file) learn which model plays the role.
        self.model_variable = f"REBENCH_{role.upper()}_MODEL"
        self.default_model = default_model
        self.budget_usd = float(budget_usd)
        self.scoring_budget_usd = None if scoring_budget_usd is None else float(scoring_budget_usd)
        self.env_file_name = env_file_name
        self.record_responses = record_responses
        self.scoring_keys_per_door = SCORING_KEYS_PER_DOOR
        self.scoring_door_span = f"{role} model: scoring runs' calls"
        # Each sample's scoring door, by the sandbox it serves (gone with the sample's sandboxes).
        self._scoring_doors: WeakKeyDictionary[SandboxEnvironment, _Door] = WeakKeyDictionary()
        self._scoring_doors_lock = anyio.Lock()

    def __call__(self, layout: Any, purpose: Purpose) -> AbstractAsyncContextManager[dict[str, str]]:
        return self.open(layout, purpose)

    # -- model and ledger ------------------------------------------------------------------------------------
    def role_model(self) -> Model:
        if self.default_model is not None:
            return get_model(role=self.role, default=self.default_model)
        return get_model(role=self.role, required=True)

    def _ledger(self) -> dict[str, Any]:
        ledger = store().get(ledger_key(self.role))
        if ledger is None:
            ledger = _empty_ledger(self.budget_usd, self.scoring_budget_usd)
            store().set(ledger_key(self.role), ledger)
        return ledger

    def _save(self, ledger: dict[str, Any]) -> None:
        store().set(ledger_key(self.role), ledger)

    def check(self, purpose: Purpose) -> None:
        """Refuse an agent call once the agent's (sample-wide) budget is spent."""
        if purpose != "agent":
            return
        ledger = self._ledger()
        account = ledger[purpose]
        if account["spent_usd"] >= self.budget_usd:
            account["refused"] += 1
            self._save(ledger)
            raise BudgetExhausted(
                f"The {self.role} model's API budget is exhausted: ${account['spent_usd']:.4f} of "
                f"${self.budget_usd:.2f} spent over {account['calls']} calls. "
                "Further calls are refused; the run goes on."
            )

    def _check_run(self, run: _Run) -> None:
        """Refuse a scoring call once this scoring run's own allowance is spent (counted in the run and the ledger)."""
        refusal = self._run_allowance_spent(run) if run.purpose == "scoring" else None
        if refusal is not None:
            run.refused += 1
            ledger = self._ledger()
            ledger["scoring"]["refused"] += 1
            self._save(ledger)
            raise refusal

    def _run_allowance_spent(self, run: _Run) -> Exception | None:
        """The error that refuses the scoring run `run` another call, or None while its allowance lasts (here: the
        scoring budget in dollars, per run)."""
        limit = self.scoring_budget_usd
        if limit is None or run.spent_usd < limit:
            return None
        return BudgetExhausted(
            f"The {self.role} model's scoring API budget for this scoring run is exhausted: "
            f"${run.spent_usd:.4f} of ${limit:.2f} over {run.calls} calls. Further calls are refused."
        )

    def _check_key(self, door: "_Door", config: GenerateConfig) -> _Run:
        """The run open on `door` whose key the request carries; else the request is refused and counted against the
        door's open runs and the ledger."""
        given = _header(config, PROXY_KEY_HEADER) or ""
        for run in door.runs.values():
            if secrets.compare_digest(given, run.key):
                return run
        for run in door.runs.values():
            run.unauthorised += 1
        ledger = self._ledger()
        ledger.setdefault("unauthorised", {"agent": 0, "scoring": 0})[door.purpose] += 1
        self._save(ledger)
        raise PermissionError(
            f"This endpoint serves only requests that carry its key in the {PROXY_KEY_HEADER} header."
        )

    def record(self, purpose: Purpose, model: Model, output: ModelOutput) -> float:
        """Add the call to the ledger; returns its price in dollars."""
        usage = output.usage
        if usage is None:
            return 0.0
        price = self.prices.price_for(model)
        ledger = self._ledger()
        account = ledger[purpose]
        cost = price.cost(int(usage.input_tokens or 0), int(usage.output_tokens or 0))
        account["calls"] += 1
        account["input_tokens"] += int(usage.input_tokens or 0)
        account["output_tokens"] += int(usage.output_tokens or 0)
        account["spent_usd"] += cost
        ledger["price"] = {
            "model": str(model),
            "input_per_mtok": price.input_per_mtok,
            "output_per_mtok": price.output_per_mtok,
            "source": price.source,
        }
        self._save(ledger)
        return cost

    # -- the service ---------------------------------------------------------------------------------------
    def _port(self, layout: Any) -> int:
        """A fresh random port. On the local sandbox the proxy listens on the host: take one that is free now."""
        low, high = PORT_RANGE
        for _ in range(50):
            port = low + secrets.randbelow(high - low)
            if getattr(layout, "is_container", True):
                return port
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
                return port
        raise ProxyUnavailable("no free port for the model proxy")

    async def _check_listener(self, layout: Any, port: int) -> None:
        """Whoever listens on `port` must be the bridge's user (the harness), else the door is someone else's."""
        python = getattr(layout, "python", "python3")
        result = await _box(layout).exec(
            [python, "-c", _LISTENER_PROBE, str(port), str(LISTEN_CHECK_TIMEOUT_S)],
            timeout=LISTEN_CHECK_TIMEOUT_S + 30,
        )
        fields = result.stdout.split() if result.success else []
        if len(fields) < 2:
            raise ProxyUnavailable(
                f"the {self.role} model proxy is not listening on port {port}: {result.stderr[-500:]}"
            )
        harness_uid, owners = fields[0], set(fields[1:])
        if owners != {harness_uid}:
            raise ProxyUnavailable(
                f"port {port} of the {self.role} model proxy is held by another user (uids {sorted(owners)}): "
                "refusing to serve through a door someone else opened"
            )

    async def _make_responses_dir(self, layout: Any, run: _Run) -> None:
        run.responses_dir = f"{layout.protected}/model-responses-{secrets.token_hex(8)}"
        result = await _box(layout).exec(["sh", "-c", f'mkdir -p -m 700 "{run.responses_dir}"'])
        if not result.success:
            raise ProxyUnavailable(f"cannot create {run.responses_dir}: {result.stderr[-500:]}")

    async def _record_response(self, layout: Any, run: _Run, output: ModelOutput) -> None:
        if run.responses_dir is None:
            return
        texts = [choice.message.text for choice in output.choices]
        run.responses_written += 1
        await _box(layout).write_file(f"{run.responses_dir}/{run.responses_written:07d}.json", json.dumps(texts))

    @asynccontextmanager
    async def open(self, layout: Any, purpose: Purpose) -> AsyncIterator[dict[str, str]]:
        """The agent's door (its own bridge, for as long as the block runs), or one scoring run on the sample's
        scoring door: a fresh key that the door serves while the block runs, with an allowance of its own."""
        if purpose == "agent":
            async with (
                self._door(layout, "agent", keys=1) as door,
                self._admitted(layout, door, door.issue_key()) as env,
            ):
                await self._announce(layout, env)
                yield env
            return
        door, key = await self._scoring_door(layout)
        try:
            async with self._admitted(layout, door, key) as env:
                yield env
        finally:
            if door.retired and not door.runs:
                await self._close_door(door)

    async def close_for_sample(self, layout: Any) -> None:
        """Close the scoring doors this sample opened (the task's cleanup calls it; no-op where none opened)."""
        layouts = [layout]
        if getattr(layout, "scoring_service", None) is not None:
            layouts.append(layout.scoring_layout)
        for box in {_box(each) for each in layouts}:
            door = self._scoring_doors.pop(box, None)
            if door is not None:
                await self._close_door(door)

    async def _scoring_door(self, layout: Any) -> tuple["_Door", str]:
        """The door the sample's scoring runs share in `layout`'s sandbox (opened at its first scoring run) and the
        next of its keys; a door whose keys are all issued is retired (closed when its last run ends) for a new one."""
        box = _box(layout)
        async with self._scoring_doors_lock:
            door = self._scoring_doors.get(box)
            if door is None or door.spent:
                if door is not None:
                    door.retired = True
                    if not door.runs:
                        await self._close_door(door)
                opening = self._door(layout, "scoring", keys=self.scoring_keys_per_door)
                held = HeldContext(opening, name="rebench-scoring-door")
                # Its calls, whichever run makes them, are logged in the span it opens in (module docstring).
                async with span(self.scoring_door_span):
                    door = await held.start()
                door.held = held
                self._scoring_doors[box] = door
            return door, door.issue_key()

    async def _close_door(self, door: "_Door") -> None:
        if door.held is not None:
            held, door.held = door.held, None
            await held.stop()

    @asynccontextmanager
    async def _door(self, layout: Any, purpose: Purpose, keys: int) -> AsyncIterator["_Door"]:
        """A bridge into `layout`'s sandbox on a fresh random port that serves a request only when it carries the key
        of a run open on it (`_admitted`). The bridge forwards only the header values listed when it opens, so the
        door's keys are drawn then, one per run it will serve."""
        model = self.role_model()
        door = _Door(purpose=purpose, port=self._port(layout), keys=[secrets.token_urlsafe(32) for _ in range(keys)])

        async def door_and_budget(
            requested: Model,
            messages: list,
            tools: list,
            tool_choice: Any,
            config: GenerateConfig,
        ) -> GenerateInput:
            run = self._check_key(door, config)
            self._check_run(run)
            self.check(run.purpose)
            run.requests += 1
            _SERVING.set(run)  # for `account`, which runs next in this request's task
            return GenerateInput(messages, tools, tool_choice, _without_header(config, PROXY_KEY_HEADER))

        async def account(requested: Model, output: ModelOutput, request: GenerateInput) -> None:
            run = _SERVING.get()
            if run is None:
                return
            try:
                cost = self.record(run.purpose, requested, output)
            except Exception:  # noqa: BLE001 - accounting must never fail the sample
                cost = 0.0
            run.calls += 1
            run.spent_usd += cost
            if door.runs.get(run.key) is run:  # a call that outlived its run leaves no record in its (removed) folder
                await self._record_response(layout, run, output)

        async with one_opening_at_a_time(
            sandbox_agent_bridge(
                model_resolver=lambda name: model,
                filter=door_and_budget,
                response_filter=account,
                port=door.port,
                forward_generation_config=True,
                forward_client_headers={PROXY_KEY_HEADER.lower(): door.keys},
                sandbox=getattr(layout, "sandbox_name", None),
            )
        ):
            await self._check_listener(layout, door.port)
            yield door

    @asynccontextmanager
    async def _admitted(self, layout: Any, door: "_Door", key: str) -> AsyncIterator[dict[str, str]]:
        """One run on `door` with `key` (one of the door's, issued for it): served until the block ends; yields the
        run's environment variables."""
        run = _Run(purpose=door.purpose, port=door.port, key=key)
        env = {
            "OPENAI_BASE_URL": f"http://localhost:{run.port}/v1",
            "OPENAI_API_KEY": run.key,
            "REBENCH_PROXY_KEY": run.key,
            self.model_variable: str(self.role_model()),
        }
        try:
            if run.purpose == "scoring" and self.record_responses:
                await self._make_responses_dir(layout, run)
                env[RESPONSES_DIR_VARIABLE] = str(run.responses_dir)
            door.runs[run.key] = run
            yield env
        finally:
            door.runs.pop(run.key, None)  # its key is refused from now on
            if run.purpose == "scoring":
                ledger = self._ledger()
                ledger.setdefault("scoring_runs", []).append(run.summary())
                self._save(ledger)
            if run.responses_dir is not None:
                await _box(layout).exec(["rm", "-rf", run.responses_dir])

    async def _announce(self, layout: Any, env: dict[str, str]) -> None:
        """Tell the agent where the endpoint is and its key: `<workspace>/model_api.env`, readable by the agent only."""
        workspace = getattr(layout, "workspace", None)
        if not workspace:
            return
        path = f"{workspace}/{self.env_file_name}"
        body = (
            f"# The {self.role} model's OpenAI-compatible endpoint (budget ${self.budget_usd:g}); send the key as the\n"
            f"# API key and in the {PROXY_KEY_HEADER} header (the workspace's clients do).\n"
            + "".join(f"{k}={v}\n" for k, v in env.items())
        )
        await _box(layout).write_file(path, body)
        user = getattr(layout, "agent_user", None)
        if user:
            await _box(layout).exec(["chown", f"{user}:{user}", path])
        await _box(layout).exec(["chmod", "600", path])
