"""Progress lines for a command that runs evals with Inspect's display off (`rebench demo`): a line when a sample
starts, one for each note its transcript records (preparation begun and done, the reference solution running, the
starting solution being scored) and one when it ends. The notes are the ones the viewer shows; nothing is printed
outside `printing_progress`."""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from inspect_ai.event import InfoEvent
from inspect_ai.hooks import Hooks, SampleEnd, SampleEvent, SampleStart, hooks

_say: Callable[[str], None] | None = None
_samples: dict[str, tuple[str, float]] = {}  # sample uuid → (sample id, started at)


@contextmanager
def printing_progress(say: Callable[[str], None]) -> Iterator[None]:
    global _say
    _say = say
    try:
        yield
    finally:
        _say = None
        _samples.clear()


@hooks(name="rebench_progress", description="rebench commands' progress lines (only while one prints them)")
class SampleProgress(Hooks):
    def enabled(self) -> bool:
        return _say is not None

    async def on_sample_start(self, data: SampleStart) -> None:
        _samples[data.sample_id] = (str(data.summary.id), time.monotonic())
        self._say(data.sample_id, "started")

    async def on_sample_event(self, data: SampleEvent) -> None:
        if isinstance(data.event, InfoEvent) and isinstance(data.event.data, str):
            self._say(data.sample_id, data.event.data)

    async def on_sample_end(self, data: SampleEnd) -> None:
        _, started = _samples.get(data.sample_id, ("", time.monotonic()))
        outcome = "stopped by an error" if data.sample.error is not None else "scored"
        self._say(data.sample_id, f"{outcome} after {time.monotonic() - started:.0f} s")

    @staticmethod
    def _say(sample_uuid: str, text: str) -> None:
        if _say is not None:
            name, _ = _samples.get(sample_uuid, ("sample", 0.0))
            _say(f"    {name}: {text}")
