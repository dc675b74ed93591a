"""run_operator as a real process: serves, reconciles, drains on SIGTERM, fails loudly."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator

import pytest
from dummy_operator import SELECTOR, STAMP, OperatorProcess

from jobcontroller.runtime.kube import CONFIGMAPS, EVENTS, KubeApi
from jobcontroller.testing.waiting import wait_for, wait_for_list


def configmap(name: str) -> dict[str, object]:
    key, value = SELECTOR.split("=")
    return {"metadata": {"name": name, "labels": {key: value}}, "data": {"k": "v"}}


@pytest.fixture
async def processes() -> AsyncIterator[list[OperatorProcess]]:
    started: list[OperatorProcess] = []
    yield started
    for proc in started:
        await proc.kill()


def common_args(kubeconfig: str, namespace: str) -> list[str]:
    return [
        "run",
        f"--kubeconfig={kubeconfig}",
        f"--namespace={namespace}",
        "--bind-address=127.0.0.1",
        "--metrics-port=0",
        "--health-port=0",
        "--log-format=json",
    ]


async def test_operator_reconciles_serves_probes_and_records_events(
    kube: KubeApi, kubeconfig: str, namespace: str, processes: list[OperatorProcess]
) -> None:
    op = OperatorProcess(*common_args(kubeconfig, namespace))
    processes.append(op)
    await op.start_serving()
    await op.wait_log(lambda e: e.get("msg") == "workers started")
    assert await op.readyz() == {
        "synced": True,
        "leader": True,  # no election: every replica reconciles
        "informers": {"configmaps": True},
    }
    assert (await op.get("/healthz"))[0] == 200

    await kube.create(CONFIGMAPS, configmap("one"), namespace=namespace)
    await wait_for(
        kube,
        CONFIGMAPS,
        "one",
        namespace=namespace,
        until=lambda cm: (
            cm is not None and (cm["metadata"].get("annotations") or {}).get(STAMP) == str(op.pid)
        ),
    )
    # The event is written after the stamp, by the recorder's own task: wait for it.
    events = await wait_for_list(
        kube,
        EVENTS,
        namespace=namespace,
        until=lambda items: any(e["involvedObject"]["name"] == "one" for e in items),
        what="the Stamped event",
    )
    events = [e for e in events if e["involvedObject"]["name"] == "one"]
    assert [(e["reason"], e["source"]["component"]) for e in events] == [
        ("Stamped", "dummy-operator")
    ]
    # The collector was paused while the controllers were built, and runs again once they
    # are, with what the start made frozen (not walked by every full collection).
    building = await op.wait_log(lambda e: e.get("msg") == "building")
    assert (building["collecting"], building["frozen"]) == (False, 0)
    stamping = await op.wait_log(lambda e: e.get("msg") == "stamping")
    assert stamping["collecting"] is True
    assert stamping["frozen"] > 10_000
    stamped = await op.wait_log(lambda e: e.get("msg") == "stamped")
    assert stamped["controller"] == "stamp-controller"
    assert stamped["key"] == f"{namespace}/one"
    assert stamped["reconcile_id"]

    status, text = await op.get("/metrics", port=op.metrics_port)
    assert status == 200
    assert (
        'controller_runtime_reconcile_total{controller="stamp-controller",result="success"}' in text
    )
    assert 'workqueue_adds_total{controller="stamp-controller",name="stamp-controller"}' in text
    assert "rest_client_requests_total{" in text

    op.signal(signal.SIGTERM)
    assert await op.wait() == 0, op.output()


async def test_sigterm_lets_the_in_flight_reconcile_finish_then_exits_zero(
    kube: KubeApi, kubeconfig: str, namespace: str, processes: list[OperatorProcess]
) -> None:
    op = OperatorProcess(*common_args(kubeconfig, namespace), "--reconcile-delay=1.5")
    processes.append(op)
    await op.start_serving()
    await op.wait_log(lambda e: e.get("msg") == "workers started")
    await kube.create(CONFIGMAPS, configmap("slow"), namespace=namespace)
    await op.wait_log(lambda e: e.get("msg") == "stamping")
    op.signal(signal.SIGTERM)
    assert await op.wait() == 0, op.output()
    cm = await kube.get(CONFIGMAPS, "slow", namespace=namespace)
    assert cm["metadata"]["annotations"][STAMP] == str(op.pid)
    drained = [e["msg"] for e in op.logs]
    assert drained.index("stamped") < drained.index("manager stopped")


async def test_a_fatal_startup_error_exits_non_zero_with_a_clear_log(
    namespace: str, processes: list[OperatorProcess]
) -> None:
    op = OperatorProcess(*common_args("/nonexistent/kubeconfig", namespace))
    processes.append(op)
    await op.start()
    assert await op.wait() == 1
    fatal = [e for e in op.logs if e.get("msg") == "exiting: fatal error"]
    assert fatal and fatal[0]["level"] == "critical"


async def test_bad_flags_exit_two(processes: list[OperatorProcess]) -> None:
    op = OperatorProcess("run", "--workers=0")
    processes.append(op)
    await op.start()
    assert await op.wait() == 2
    assert "usage: dummy-operator [run] [options]" in op.output()
