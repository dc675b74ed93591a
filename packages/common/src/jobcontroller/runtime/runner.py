"""``run_operator``: the ``main`` of every operator console script.

``tf-operator run --namespace kubeflow --leader-elect`` (the ``run`` is optional) parses the
shared flags plus the framework's own, configures logging, connects to the API server, builds
the framework's controllers into a :class:`~jobcontroller.runtime.manager.Manager`, serves
metrics and probes, and runs until a signal or a fatal error.

Exit status: 0 after SIGTERM/SIGINT and a graceful drain; 1 on a fatal error (including a lost
Lease: the process must not keep running as a non-leader that still believes it leads, and a
restart re-joins the election cleanly); 2 on bad flags. A second SIGTERM/SIGINT during the drain
cancels the remaining reconciles.

Leader election gets its own API client, so a reconcile storm that saturates the main client's
QPS budget cannot delay Lease renewals (controller-runtime does the same); so do Events, so
that pod creations and Events never wait for each other.

The event loop is uvloop's (libuv's transports and its own TLS layer): about a fifth less CPU
per API request than asyncio's default loop (bench/bench_requests.py); see :func:`run_loop`.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import signal
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

import structlog

from jobcontroller.runtime.events import EventRecorder
from jobcontroller.runtime.flags import Settings, parse_settings
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.runtime.kubeconfig import load_config
from jobcontroller.runtime.leader import LeaderElectionConfig, LeaderElector, LeadershipLost
from jobcontroller.runtime.logging import configure_logging
from jobcontroller.runtime.manager import Controller, Manager
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.server import OperatorServer

__all__ = ["Build", "freeze_what_lives", "new_event_loop", "run_loop", "run_operator", "serve"]

T = TypeVar("T")

log = structlog.get_logger(__name__)

Build = Callable[[Settings, Manager], list[Controller]]

#: Leader-election traffic is a few requests per retry period; this only bounds a bug.
_LEADER_API_QPS = 5.0
_LEADER_API_BURST = 10


def run_operator(
    *,
    name: str,
    argv: Sequence[str] | None,
    build: Build,
    add_flags: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Parse flags, run operator ``name`` until stopped, and return the exit status.

    The cyclic garbage collector is paused from here until the controllers are built, then
    what exists is frozen (:func:`freeze_what_lives`)."""
    gc.disable()
    try:
        settings = parse_settings(name=name, argv=argv, add_flags=add_flags)
        configure_logging(fmt=settings.log_format, level=settings.log_level)
        return run_loop(
            serve(name=name, settings=settings, build=build, after_build=freeze_what_lives)
        )
    except KeyboardInterrupt:  # a signal before the handlers were installed
        return 1
    finally:
        gc.enable()


def freeze_what_lives() -> None:
    """Move every object that exists now to the collector's permanent generation and resume
    collecting. Called once the controllers are built: by then the process holds what it
    keeps until it exits (the modules of every enabled kind, their classes and models, the
    flags, the controllers), some hundred thousand objects that the cyclic collector would
    otherwise walk in each full collection (:func:`gc.freeze`, as CPython's documentation
    suggests after the imports of a long-lived process). Paused while they were made, it
    walked them over and over for nothing to collect: about a tenth of a start's CPU time
    here. Reference counting still frees a frozen object; only a cycle already unreachable
    at the freeze stays (a start makes little such garbage, once)."""
    gc.freeze()
    gc.enable()


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's loop, or asyncio's default where uvloop has no build (not Linux or macOS)."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_loop(main: Coroutine[Any, Any, T]) -> T:
    """:func:`asyncio.run` on :func:`new_event_loop`'s loop."""
    with asyncio.Runner(loop_factory=new_event_loop) as runner:
        return runner.run(main)


async def serve(
    *,
    name: str,
    settings: Settings,
    build: Build,
    after_build: Callable[[], None] | None = None,
) -> int:
    """The async body of :func:`run_operator`, for callers that already parsed settings.
    ``after_build`` is called once the controllers are built, before anything is listed."""
    log.info(
        "starting operator",
        operator=name,
        namespace=settings.namespace or "(all)",
        workers=settings.workers,
        leader_elect=settings.leader_elect,
    )
    signals = _Signals()
    signals.install()
    metrics = Metrics()
    api: KubeApi | None = None
    leader_api: KubeApi | None = None
    events_api: KubeApi | None = None
    server: OperatorServer | None = None
    try:
        # One read of the kubeconfig (and one TLS context) for the three clients.
        config = load_config(settings.kubeconfig)
        api = KubeApi(
            config,
            qps=settings.kube_api_qps,
            burst=settings.kube_api_burst,
            metrics=metrics,
            user_agent=name,
        )
        # Events get a client and a QPS budget of their own (as large as the main one), so a
        # burst of pod creations never starves them and they never delay a pod.
        events_api = KubeApi(
            config,
            qps=settings.kube_api_qps,
            burst=settings.kube_api_burst,
            metrics=metrics,
            user_agent=f"{name}-events",
        )
        elector = None
        if settings.leader_elect:
            leader_api = KubeApi(
                config,
                qps=_LEADER_API_QPS,
                burst=_LEADER_API_BURST,
                user_agent=f"{name}-leader-election",
            )
            elector = LeaderElector(
                leader_api,
                LeaderElectionConfig(
                    namespace=settings.leader_election_namespace,
                    name=settings.leader_election_id,
                    lease_duration=settings.leader_election_lease_duration,
                    renew_deadline=settings.leader_election_renew_deadline,
                    retry_period=settings.leader_election_retry_period,
                ),
                metrics=metrics,
            )
            # As the main client's (the manager sets that one): checked after the rate
            # limiter's wait, so an Event queued while leading is not sent after the Lease went.
            events_api.write_gate = elector.holds_lease
        manager = Manager(
            api,
            component=name,
            metrics=metrics,
            namespace=settings.namespace,
            workers=settings.workers,
            elector=elector,
            events=EventRecorder(events_api, component=name, metrics=metrics),
            drain_timeout=settings.drain_timeout,
        )
        signals.attach(manager)
        for controller in build(settings, manager):
            manager.add(controller)
        if after_build is not None:
            after_build()

        server = OperatorServer(
            registry=metrics.registry,
            readiness=manager.readiness,
            healthy=lambda: manager.healthy,
            host=settings.bind_address,
            metrics_port=settings.metrics_port,
            health_port=settings.health_port,
        )
        await server.start()
        await manager.run()
    except LeadershipLost as exc:
        log.error("exiting: leadership lost", error=str(exc))
        return 1
    except Exception as exc:
        log.critical("exiting: fatal error", error=repr(exc), exc_info=exc)
        return 1
    finally:
        signals.remove()
        if server is not None:
            await server.stop()
        for client in (leader_api, events_api, api):
            if client is not None:
                await client.close()
    log.info("operator stopped", operator=name)
    return 0


class _Signals:
    """SIGTERM/SIGINT handling from the first moment; forwarded to the manager once it exists."""

    _SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self._manager: Manager | None = None
        self._received = 0

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in self._SIGNALS:
            loop.add_signal_handler(signum, self._on_signal, signum)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in self._SIGNALS:
            loop.remove_signal_handler(signum)

    def attach(self, manager: Manager) -> None:
        self._manager = manager
        if self._received:
            manager.stop(force=self._received > 1)

    def _on_signal(self, signum: int) -> None:
        self._received += 1
        sig = signal.Signals(signum).name
        if self._received == 1:
            log.info("signal received; draining", signal=sig)
        else:
            log.warning("another signal; cancelling in-flight reconciles", signal=sig)
        if self._manager is not None:
            self._manager.stop(force=self._received > 1)
