"""At most one status write per job per interval, the latest report winning: what bounds the
API writes of the progress endpoint (:mod:`jobcontroller.controller.progressserver`) whatever the
pods send."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import structlog
from msgspec import Struct, field

from jobcontroller.core.progress import ReportError

__all__ = ["Coalescer", "Write"]

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

Write = Callable[[str, str, Obj], Awaitable[bool]]
"""``(namespace, name, trainerStatus) -> whether it was written`` (False: it changed nothing)."""


class _Slot(Struct):
    pending: Obj | None = None
    task: asyncio.Task[None] | None = None


class Coalescer(Struct):
    """At most one status write per job per ``interval`` seconds, the latest report
    winning. Memory: one slot per job that reported within the last interval."""

    interval: float
    write: Write
    sleep: Callable[[float], Coroutine[Any, Any, None]] = asyncio.sleep
    writes: int = 0
    coalesced: int = 0
    _slots: dict[tuple[str, str], _Slot] = field(default_factory=dict)

    async def submit(self, namespace: str, name: str, status: Obj) -> bool:
        """True when written now (or found unchanged), False when held for later. A failed
        immediate write raises (the reporter is told); a deferred one is only logged."""
        key = (namespace, name)
        slot = self._slots.get(key)
        if slot is not None:
            slot.pending = status
            self.coalesced += 1
            return False
        slot = self._slots[key] = _Slot()
        slot.task = asyncio.get_running_loop().create_task(
            self._cool_down(key, slot), name=f"progress:{namespace}/{name}"
        )
        if await self.write(namespace, name, status):
            self.writes += 1
        return True

    @property
    def tracked(self) -> int:
        return len(self._slots)

    async def _cool_down(self, key: tuple[str, str], slot: _Slot) -> None:
        try:
            while True:
                await self.sleep(self.interval)
                pending, slot.pending = slot.pending, None
                if pending is None:
                    return
                try:
                    if await self.write(*key, pending):
                        self.writes += 1
                except ReportError as exc:
                    log.info("coalesced progress not written", job=key, error=str(exc))
                except Exception as exc:
                    log.warning("coalesced progress not written", job=key, error=repr(exc))
        finally:
            if self._slots.get(key) is slot:
                del self._slots[key]

    async def close(self) -> None:
        tasks = [s.task for s in self._slots.values() if s.task is not None]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks)
