"""An async context held open by a task of its own, so that one step of a sample can open it and another close it.

A context's task groups and cancel scopes must be entered and exited in one asyncio task, and a sample's steps (its
setup, each scoring run, its cleanup) run in different tasks: the agent's services open at setup and close at
cleanup; a model proxy's scoring door opens at a sample's first scoring run and closes at its cleanup.
"""

import asyncio
from contextlib import AbstractAsyncContextManager
from typing import Generic, TypeVar

Opened = TypeVar("Opened")


class HeldContext(Generic[Opened]):
    def __init__(self, context: AbstractAsyncContextManager[Opened], name: str) -> None:
        self._context, self._name = context, name
        self._stop = asyncio.Event()
        self._holder: asyncio.Task[None] | None = None

    async def start(self) -> Opened:
        """Enter the context in the holder task; returns what it yields, or raises what entering it raised."""
        opened: asyncio.Future[Opened] = asyncio.get_running_loop().create_future()

        async def hold() -> None:
            try:
                async with self._context as value:
                    opened.set_result(value)
                    await self._stop.wait()
            except BaseException as ex:
                if opened.done():
                    raise
                opened.set_exception(ex)

        self._holder = asyncio.create_task(hold(), name=self._name)
        return await opened

    async def stop(self) -> None:
        """Exit the context (in the holder task) and wait until it has; what exiting raised is raised here."""
        self._stop.set()
        if self._holder is not None:
            await self._holder
