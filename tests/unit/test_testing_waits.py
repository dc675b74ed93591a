"""The tests' wait helpers: a timeout's message carries what was true when it timed out (an
operator's log tail read then), not what was true when the wait began."""

from __future__ import annotations

from typing import Any

import pytest

from jobcontroller.runtime.kube import PODS
from jobcontroller.testing.waiting import WaitTimeout, wait_for, wait_for_list


class _Cluster:
    """Answers GET and LIST with one pod that never changes; counts the reads."""

    def __init__(self) -> None:
        self.reads = 0

    async def get(self, resource: Any, name: str, *, namespace: str | None = None) -> Any:
        self.reads += 1
        return {"metadata": {"name": name}, "status": {"phase": "Pending"}}

    async def list(self, resource: Any, **_: Any) -> tuple[list[Any], str]:
        self.reads += 1
        return [{"metadata": {"name": "p"}, "status": {"phase": "Pending"}}], "1"


async def test_a_callable_label_is_read_at_the_timeout_not_before() -> None:
    cluster = _Cluster()
    log: list[str] = ["start 1"]

    def tail() -> str:
        log.append(f"after {cluster.reads} reads")
        return "\n".join(log)

    with pytest.raises(WaitTimeout) as one:
        await wait_for(
            cluster,  # type: ignore[arg-type]
            PODS,
            "p",
            until=lambda pod: False,
            timeout=0.05,
            interval=0.01,
            what=lambda: f"p Running\n{tail()}",
        )
    assert "waiting for p Running\nstart 1\nafter " in str(one.value)
    assert f"after {cluster.reads} reads" in str(one.value) and cluster.reads > 1
    with pytest.raises(WaitTimeout) as two:
        await wait_for_list(
            cluster,  # type: ignore[arg-type]
            PODS,
            until=lambda pods: False,
            timeout=0.05,
            interval=0.01,
            what=tail,
        )
    assert f"after {cluster.reads} reads" in str(two.value)


async def test_a_text_label_and_no_label() -> None:
    with pytest.raises(WaitTimeout, match="waiting for the pod; last seen"):
        await wait_for(
            _Cluster(),  # type: ignore[arg-type]
            PODS,
            "p",
            until=lambda pod: False,
            timeout=0.01,
            what="the pod",
        )
    with pytest.raises(WaitTimeout, match="waiting for pods/p; last seen"):
        await wait_for(_Cluster(), PODS, "p", until=lambda pod: False, timeout=0.01)  # type: ignore[arg-type]
