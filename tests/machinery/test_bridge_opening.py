"""Model-proxy bridges open one at a time in a process: the first opening installs Inspect's sandbox tools into a
host folder that concurrent local sandboxes share, and two first openings at once broke each other."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from rebench_inspect.runtime.model_proxy import one_opening_at_a_time


def test_openings_take_turns_and_open_bridges_live_side_by_side():
    events: list[str] = []

    @asynccontextmanager
    async def bridge(name: str) -> AsyncIterator[str]:
        events.append(f"{name} opening")
        await anyio.sleep(0.05)  # the other sample would install the tools now, were it let in
        events.append(f"{name} open")
        yield name

    async def sample(name: str) -> None:
        async with one_opening_at_a_time(bridge(name)) as opened:
            assert opened == name
            events.append(f"{name} serving")
            await anyio.sleep(0.2)
            events.append(f"{name} closed")

    async def two_samples() -> None:
        async with anyio.create_task_group() as samples:
            samples.start_soon(sample, "a")
            samples.start_soon(sample, "b")

    anyio.run(two_samples)
    first, second = events[0].split()[0], "b" if events[0].startswith("a") else "a"
    # Openings do not overlap; the second opens while the first is still serving.
    assert events[:3] == [f"{first} opening", f"{first} open", f"{first} serving"]
    assert events.index(f"{second} open") < events.index(f"{first} closed")
