"""The live streams of ``kfjob ui``'s pages, as server-sent events.

A page holds at most two: its own (the jobs page's rows, or a job page's sections) and, on a
job's page, a pod's log while the log panel shows one. Each stream's thread sleeps on a
:class:`~kfjob.ui.watch.Waker`: woken by news from the watches, or by the browser closing the
connection, which ends the stream and everything behind it (a job page's watches, a log's API
stream) at once. A comment line every ``HEARTBEAT`` seconds of quiet keeps proxies from closing
an idle stream.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import queue
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

from kfjob.client import ApiFailure
from kfjob.ui import pages
from kfjob.ui.access import Access
from kfjob.ui.cluster import Cluster, abort
from kfjob.ui.html import job_row_html
from kfjob.ui.hub import Hub
from kfjob.ui.jobfeed import JobFeed, JobView
from kfjob.ui.model import JobRow, ServedKind
from kfjob.ui.watch import Waker

__all__ = ["EventStream", "job_sections", "job_stream", "jobs_stream", "log_stream"]

HEARTBEAT = 15.0
LOG_TAIL = 2000
#: Lines a log stream holds for a slow page before its reader waits.
LOG_BUFFER = 1000


class EventStream:
    """One server-sent-events response, and the waker its thread sleeps on."""

    def __init__(self, wfile: io.BufferedIOBase, client: socket.socket) -> None:
        self.wfile = wfile
        self.waker = Waker(client)

    def send(self, event: str, data: object) -> None:
        self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def ping(self) -> None:
        self.wfile.write(b": ping\n\n")
        self.wfile.flush()

    def close(self) -> None:
        self.waker.close()


def row_event(row: JobRow, now: dt.datetime) -> dict[str, str]:
    return {
        "key": row.key,
        "kind": row.kind,
        "namespace": row.namespace,
        "state": row.state,
        "html": job_row_html(row, now=now),
    }


def jobs_stream(stream: EventStream, *, hub: Hub, closing: threading.Event) -> None:
    """The jobs page's rows: all of them, then each change the hub's watches see."""
    sub, rows = hub.subscribe(notify=stream.waker.notify)
    try:
        now = dt.datetime.now(dt.UTC)
        stream.send("reset", {"rows": [row_event(r, now) for r in rows]})
        while not closing.is_set():
            woke = stream.waker.wait(HEARTBEAT)
            if woke == "hangup" or sub.dropped:
                return  # gone; or too slow, and the page reconnects to start again
            if woke == "timeout":
                stream.ping()
                continue
            now = dt.datetime.now(dt.UTC)
            while True:
                try:
                    what, item = sub.queue.get_nowait()
                except queue.Empty:
                    break
                if what == "upsert":
                    stream.send("upsert", row_event(item, now))
                else:
                    stream.send("delete", {"key": item})
    finally:
        hub.unsubscribe(sub)


def job_sections(
    view: JobView,
    kind: ServedKind,
    *,
    access: Access,
    csrf: str,
    now: dt.datetime,
    env_cache: dict[str, str],
) -> dict[str, str]:
    """The page's sections for ``view`` (its job present). The env is rendered again only
    when the job's pods are other pods."""
    assert view.job is not None
    meta = view.job.get("metadata") or {}
    ident = " ".join(str((p.get("metadata") or {}).get("uid")) for p in view.pods)
    if env_cache.get("ident") != ident or "html" not in env_cache:
        env_cache["ident"], env_cache["html"] = ident, pages.env_section(kind, view.job, view.pods)
    return pages.job_sections(
        kind,
        view.job,
        pods=view.pods,
        events=view.events,
        env=env_cache["html"],
        csrf=csrf,
        now=now,
        permissions=access.actions(kind, str(meta.get("namespace") or "")),
    )


def job_stream(
    stream: EventStream,
    *,
    cluster: Cluster,
    access: Access,
    kind: ServedKind,
    namespace: str,
    name: str,
    csrf: str,
    since: dt.datetime,
    closing: threading.Event,
    on_feed: Callable[[JobFeed], None] = lambda feed: None,
) -> None:
    """A job's page: its sections again whenever the job, its pods or their events change
    (ages rendered against ``since``, the page's time, so unchanged sections are the same
    markup as the page's and the page skips them)."""
    feed = JobFeed(cluster, kind, namespace, name, notify=stream.waker.notify)
    on_feed(feed)
    feed.start()
    last: dict[str, str] = {}
    env_cache: dict[str, str] = {}
    said = ""
    try:
        while not closing.is_set():
            view = feed.view()
            if view.synced:
                if view.job is None:
                    refused = view.problems.get("job")
                    message = (
                        f"The API server refused to show {kind.kind} {namespace}/{name}: {refused}"
                        if refused
                        else f"{kind.kind} {namespace}/{name} is gone (deleted)."
                    )
                    stream.send("gone", {"message": message})
                    return
                sections = job_sections(
                    view, kind, access=access, csrf=csrf, now=since, env_cache=env_cache
                )
                changed = {k: v for k, v in sections.items() if last.get(k) != v}
                if changed:
                    last.update(changed)
                    stream.send("sections", changed)
                problems = "; ".join(sorted(view.problems.values()))
                if problems != said:
                    said = problems
                    stream.send("refused", {"message": problems})
            woke = stream.waker.wait(HEARTBEAT)
            if woke == "hangup":
                return
            if woke == "timeout":
                stream.ping()
    finally:
        feed.close()


def log_stream(
    stream: EventStream,
    *,
    cluster: Cluster,
    namespace: str,
    pod: str,
    query: Mapping[str, str],
    closing: threading.Event,
) -> None:
    """A pod's log as events of lines. A reader thread reads the API's stream; this one sends
    what it read and, when the page closes the panel, ends the API's stream."""
    try:
        resp = cluster.open_log(
            namespace,
            pod,
            container=query.get("container") or None,
            follow=query.get("follow") == "1",
            previous=query.get("previous") == "1",
            tail_lines=LOG_TAIL,
        )
    except ApiFailure as exc:
        stream.send("failed", {"message": f"{exc.status}: {exc.message}"})
        return
    lines: queue.Queue[str | None] = queue.Queue(maxsize=LOG_BUFFER)
    done = threading.Event()

    def put(item: str | None) -> None:
        while not done.is_set():  # a full buffer waits for the page, unless it is gone
            try:
                lines.put(item, timeout=0.5)
            except queue.Full:
                continue
            stream.waker.notify()
            return

    def read() -> None:
        buffer = b""
        try:
            for chunk in resp.stream(4096, decode_content=True):
                buffer += chunk
                *complete, buffer = buffer.split(b"\n")
                for line in complete:
                    put(line.decode(errors="replace"))
            if buffer:
                put(buffer.decode(errors="replace"))
        except Exception:  # aborted below, or the API ended it
            pass
        finally:
            put(None)

    reader = threading.Thread(target=read, name=f"kfjob-ui-log {namespace}/{pod}", daemon=True)
    reader.start()
    try:
        while not closing.is_set():
            woke = stream.waker.wait(HEARTBEAT)
            if woke == "hangup":
                return
            if woke == "timeout":
                stream.ping()
                continue
            batch: list[Any] = []
            while len(batch) < 500:
                try:
                    batch.append(lines.get_nowait())
                except queue.Empty:
                    break
                if batch[-1] is None:
                    break
            text = [b for b in batch if b is not None]
            if text:
                stream.send("lines", text)
            if batch and batch[-1] is None:
                stream.send("end", {"message": "The log ended."})
                return
            if len(batch) >= 500:
                stream.waker.notify()  # more to send: come round again
    finally:
        done.set()
        abort(resp)
