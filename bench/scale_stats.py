"""Pure arithmetic of the ``scale-50k`` scenario (no I/O), kept apart so unit tests can check it.

Latencies come from the jobs' own timestamps: ``metadata.creationTimestamp`` (set by the API
server) and the ``Running`` condition's ``lastTransitionTime`` (set by the operator). Both are
RFC 3339 with one-second precision, so each latency is exact to about ±1 s.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Sequence
from typing import Any


def ts(text: str) -> float:
    """An RFC 3339 timestamp (``...Z``) as a Unix time."""
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def percentile(xs: Sequence[float], q: float) -> float | None:
    """The nearest-rank ``q``-th percentile (0 < q <= 100): the smallest value with at least
    q% of the values at or below it. Nearest rank, not interpolation, because with whole-second
    inputs an interpolated p99 would report a latency no job had."""
    if not xs:
        return None
    if not 0 < q <= 100:
        raise ValueError(f"percentile must be in (0, 100], not {q}")
    ordered = sorted(xs)
    return ordered[max(math.ceil(q / 100 * len(ordered)), 1) - 1]


def running_since(job: dict[str, Any]) -> float | None:
    """When the job's ``Running`` condition last became True, or None if it is not True."""
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Running" and cond.get("status") == "True":
            when = cond.get("lastTransitionTime")
            return ts(when) if when else None
    return None


def running_latencies(jobs: Iterable[dict[str, Any]]) -> tuple[list[float], int]:
    """(seconds from each Running job's creation to its Running condition, jobs not Running)."""
    out, missing = [], 0
    for job in jobs:
        running = running_since(job)
        created = (job.get("metadata") or {}).get("creationTimestamp")
        if running is None or not created:
            missing += 1
        else:
            out.append(running - ts(created))
    return out, missing


def per_object_kb(*, rss_mb: float, idle_mb: float, objects: int) -> float:
    """RSS above the idle process, per cached object, in KB (1 KB = 1024 bytes)."""
    if objects <= 0:
        raise ValueError("objects must be positive")
    return (rss_mb - idle_mb) * 1024 / objects


def cached_objects(*, pods: int, pods_per_job: int, services_per_pod: float) -> int:
    """Jobs, pods and services an operator caches for ``pods`` pods."""
    return pods // pods_per_job + pods + round(pods * services_per_pod)


def projected_mb(*, idle_mb: float, kb_per_object: float, objects: int) -> float:
    """RSS of one process caching ``objects`` at ``kb_per_object`` above ``idle_mb``."""
    return idle_mb + kb_per_object * objects / 1024
