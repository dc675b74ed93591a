"""The informer lists in pages on the real kube-apiserver: a list longer than a page brings
every object, and the watch starts from the list's snapshot, so a change made while the
pages are read is neither lost nor seen twice. (LISTs are what an informer reads when its
server cannot stream the initial state: ``watch_list=False`` here.)"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from test_informer import Calls, cm, in_step, running, stopped

from jobcontroller.runtime.informer import Informer, InformerSettings
from jobcontroller.runtime.kube import CONFIGMAPS, KubeApi

SELECTOR = "informer-test=yes"
PAGE = 5


async def test_a_list_longer_than_a_page_brings_every_object_and_the_watch_misses_nothing(
    kube: KubeApi, kubeconfig: str, namespace: str
) -> None:
    await asyncio.gather(
        *(kube.create(CONFIGMAPS, cm(f"c{i:02d}"), namespace=namespace) for i in range(23))
    )
    # The informer's own client, whose GETs are noted; after its first page the objects change.
    api = await KubeApi.from_config(kubeconfig=kubeconfig, qps=500, burst=500)
    pages: list[dict[str, Any]] = []
    listed_rv: list[str] = []
    request = api.request

    async def noting(method: str, path: str, **kwargs: Any) -> Any:
        answer = await request(method, path, **kwargs)
        query: Mapping[str, Any] = kwargs.get("query") or {}
        if method == "GET" and "watch" not in query and "limit" in query:
            pages.append({**query, "items": len(answer.get("items") or ())})
            listed_rv.append(answer["metadata"]["resourceVersion"])
            if len(pages) == 1:
                # Between two pages: a listed object changes, one is deleted, one is added.
                await kube.merge_patch(CONFIGMAPS, "c00", {"data": {"v": "1"}}, namespace=namespace)
                await kube.delete(CONFIGMAPS, "c01", namespace=namespace)
                await kube.create(CONFIGMAPS, cm("late"), namespace=namespace)
        return answer

    api.request = noting  # type: ignore[method-assign]  # a spy on the informer's GETs
    informer = Informer(
        api,
        CONFIGMAPS,
        namespace=namespace,
        label_selector=SELECTOR,
        settings=InformerSettings(list_page_size=PAGE, watch_list=False),
    )
    calls = Calls(informer)
    try:
        task = await running(informer)
        try:
            await in_step(informer, kube, namespace, SELECTOR)
            await asyncio.sleep(1)  # time for a repeated event to show
        finally:
            await stopped(informer, task)
    finally:
        await api.close()

    # Every page asked for PAGE objects; the continued ones carried only the token.
    assert len(pages) == 5, pages
    assert [p["items"] for p in pages] == [5, 5, 5, 5, 3]
    assert all(p["limit"] == PAGE for p in pages)
    assert pages[0]["resourceVersion"] == "" and "continue" not in pages[0]
    assert all(p["continue"] and "resourceVersion" not in p for p in pages[1:])
    # One snapshot: every page at the first page's version, from which the watch began.
    assert len(set(listed_rv)) == 1
    # The list (at its snapshot) had c00 unchanged and c01; the watch brought the rest, once.
    assert calls.counts[("update", "c00")] == 1
    assert calls.counts[("delete", "c01")] == 1
    assert calls.counts[("add", "late")] == 1
    assert sum(n for (kind, _), n in calls.counts.items() if kind == "add") == 24
    assert informer.store.get(namespace, "c00")["data"] == {"v": "1"}  # type: ignore[index]
    assert informer.store.get(namespace, "c01") is None
