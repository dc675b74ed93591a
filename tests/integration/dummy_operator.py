"""A tiny operator run as a real process by the runner and leader-election tests.

It reconciles ConfigMaps labelled ``dummy-operator=stamp`` by annotating them with the pid of
the replica that did it (so a test can tell which replica reconciles) and recording an Event.
``--reconcile-delay`` makes each reconcile take that long, to catch a SIGTERM mid-reconcile.

Run: ``python -m dummy_operator run --kubeconfig ... --namespace ...`` with this directory on
``PYTHONPATH``. :class:`OperatorProcess` does that for tests and follows the JSON log lines.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import structlog

from jobcontroller.runtime.flags import Settings
from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.kube import CONFIGMAPS
from jobcontroller.runtime.manager import Controller, Manager
from jobcontroller.runtime.runner import run_operator
from jobcontroller.runtime.store import object_key
from jobcontroller.runtime.workqueue import WorkQueue

STAMP = "dummy-operator.test/reconciled-by"
SELECTOR = "dummy-operator=stamp"

log = structlog.get_logger("dummy_operator")


class StampController:
    name = "stamp-controller"

    def __init__(self, delay: float) -> None:
        self._delay = delay
        self._pid = str(os.getpid())

    def setup(self, manager: Manager, queue: WorkQueue[str]) -> None:
        self._manager = manager
        self._informer: Informer = manager.informer(CONFIGMAPS, label_selector=SELECTOR)
        self._informer.add_handlers(
            on_add=lambda obj: queue.add(object_key(obj)),
            on_update=lambda old, new: queue.add(object_key(new)),
        )

    async def reconcile(self, key: str) -> float | None:
        namespace, name = key.split("/")
        obj = self._informer.store.get(namespace, name)
        if obj is None:
            return None
        annotations = obj["metadata"].get("annotations") or {}
        if annotations.get(STAMP) == self._pid:
            return None
        # What the runner left of the collector: running, and the start's objects frozen.
        log.info("stamping", collecting=gc.isenabled(), frozen=gc.get_freeze_count())
        await asyncio.sleep(self._delay)
        patch = {"metadata": {"annotations": {STAMP: self._pid}}}
        await self._manager.api.merge_patch(CONFIGMAPS, name, patch, namespace=namespace)
        self._manager.events.record(
            obj, type="Normal", reason="Stamped", message=f"stamped by {self._pid}"
        )
        log.info("stamped")
        return None


def _add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reconcile-delay", type=float, default=0.0)


def _build(settings: Settings, manager: Manager) -> list[Controller]:
    log.info("building", collecting=gc.isenabled(), frozen=gc.get_freeze_count())
    return [StampController(settings.extras["reconcile_delay"])]


def main(argv: list[str] | None = None) -> int:
    return run_operator(name="dummy-operator", argv=argv, build=_build, add_flags=_add_flags)


# -- driving it from tests ---------------------------------------------------------------------


class OperatorProcess:
    """One dummy operator process; collects its JSON log lines as they come."""

    def __init__(self, *args: str) -> None:
        self.args = args
        self.logs: list[dict[str, Any]] = []
        self.raw: list[str] = []
        self._new_line = asyncio.Event()
        self._proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None
        self.metrics_port = self.health_port = 0

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode if self._proc is not None else None

    async def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
        env.pop("KUBERNETES_SERVICE_HOST", None)
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "dummy_operator",
            *self.args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        self._reader = asyncio.create_task(self._read())

    async def start_serving(self) -> None:
        """Start and wait for the HTTP server's ports."""
        await self.start()
        serving = await self.wait_log(lambda e: e.get("msg") == "serving")
        self.metrics_port, self.health_port = serving["metrics_port"], serving["health_port"]

    async def _read(self) -> None:
        assert self._proc is not None and self._proc.stderr is not None
        async for line in self._proc.stderr:
            text = line.decode(errors="replace").rstrip()
            self.raw.append(text)
            with contextlib.suppress(ValueError):
                self.logs.append(json.loads(text))
            self._new_line.set()
        self._new_line.set()

    async def wait_log(
        self, match: Callable[[dict[str, Any]], bool], *, within: float = 30
    ) -> dict[str, Any]:
        async with asyncio.timeout(within):
            seen = 0
            while True:
                for entry in self.logs[seen:]:
                    if match(entry):
                        return entry
                seen = len(self.logs)
                if self._reader is not None and self._reader.done():
                    raise AssertionError("process ended; log:\n" + self.output())
                self._new_line.clear()
                await self._new_line.wait()

    def output(self) -> str:
        return "\n".join(self.raw[-60:])

    def signal(self, signum: signal.Signals) -> None:
        assert self._proc is not None
        self._proc.send_signal(signum)

    async def wait(self, *, within: float = 30) -> int:
        assert self._proc is not None
        code = await asyncio.wait_for(self._proc.wait(), within)
        if self._reader is not None:
            await self._reader
        return code

    async def kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            self._proc.kill()
            await self._proc.wait()
        if self._reader is not None:
            await self._reader

    async def get(self, path: str, *, port: int | None = None) -> tuple[int, str]:
        url = f"http://127.0.0.1:{port or self.health_port}{path}"
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            return resp.status, await resp.text()

    async def readyz(self) -> dict[str, Any]:
        _, body = await self.get("/readyz")
        result: dict[str, Any] = json.loads(body)
        return result


if __name__ == "__main__":
    sys.exit(main())
