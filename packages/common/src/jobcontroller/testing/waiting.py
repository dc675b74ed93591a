"""Waiting for the cluster to reach a state, in tests.

Tests poll the apiserver at a short interval rather than watching: a poll cannot miss an event
or hang on a dead stream, and on failure the message shows the last state seen, which is what a
reader of a red test needs. (The product itself never polls; it watches.)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jobcontroller.runtime.kube import KubeApi, Resource


class WaitTimeout(AssertionError):
    """The expected state was not reached in time."""


#: What a wait is for, in its timeout message: a text, or a function giving it at the timeout
#: (an operator's log tail read then, not when the wait began).
What = str | Callable[[], str]


def _label(what: What, default: str) -> str:
    return (what() if callable(what) else what) or default


def _brief(obj: Any, limit: int = 3000) -> str:
    text = json.dumps(obj, indent=1, default=str)
    return text if len(text) <= limit else text[:limit] + "..."


async def wait_for(
    kube: KubeApi,
    resource: Resource,
    name: str,
    *,
    namespace: str | None = None,
    until: Callable[[dict[str, Any] | None], bool],
    timeout: float = 60.0,
    interval: float = 0.2,
    what: What = "",
) -> dict[str, Any] | None:
    """Poll one object until ``until(obj)`` holds (obj is None while it does not exist).
    ``what`` names the wait in the timeout message (a function: called at the timeout)."""
    from jobcontroller.runtime.kube import ApiError

    deadline = time.monotonic() + timeout
    obj: dict[str, Any] | None = None
    while True:
        try:
            obj = await kube.get(resource, name, namespace=namespace)
        except ApiError as exc:
            if exc.status != 404:
                raise
            obj = None
        if until(obj):
            return obj
        if time.monotonic() > deadline:
            label = _label(what, f"{resource.plural}/{name}")
            raise WaitTimeout(
                f"timed out after {timeout}s waiting for {label}; last seen:\n{_brief(obj)}"
            )
        await asyncio.sleep(interval)


async def wait_for_list(
    kube: KubeApi,
    resource: Resource,
    *,
    namespace: str | None = None,
    label_selector: str | None = None,
    until: Callable[[list[dict[str, Any]]], bool],
    timeout: float = 60.0,
    interval: float = 0.2,
    what: What = "",
) -> list[dict[str, Any]]:
    """Poll a LIST until ``until(items)`` holds."""
    deadline = time.monotonic() + timeout
    while True:
        items, _ = await kube.list(resource, namespace=namespace, label_selector=label_selector)
        if until(items):
            return items
        if time.monotonic() > deadline:
            summary = [
                {
                    "name": i.get("metadata", {}).get("name"),
                    "status": i.get("status", {}).get("phase")
                    or i.get("status", {}).get("conditions"),
                }
                for i in items
            ]
            label = _label(what, resource.plural)
            raise WaitTimeout(
                f"timed out after {timeout}s waiting for {label}; last seen:\n{_brief(summary)}"
            )
        await asyncio.sleep(interval)
