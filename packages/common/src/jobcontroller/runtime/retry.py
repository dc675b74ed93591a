"""The API client's timeouts and retry policy: which failed requests are tried again, and how
long to wait first (see :mod:`jobcontroller.runtime.kube` for why these verbs and statuses)."""

from __future__ import annotations

import random

from msgspec import Struct

from jobcontroller.runtime.http1 import ConnectFailed, HttpError

__all__ = ["ApiSettings", "retry_delay", "should_retry_exception", "should_retry_status"]

_IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "PATCH", "DELETE"})
_RETRY_STATUSES = frozenset({500, 502, 503, 504})


class ApiSettings(Struct, frozen=True):
    """Timeouts and retry policy of a :class:`KubeApi`."""

    connect_timeout: float = 10.0
    """Seconds to establish a TCP+TLS connection (or get one from the pool)."""
    read_timeout: float = 60.0
    """Seconds of socket silence before a non-watch request fails; the server's own limit is 60."""
    watch_read_margin: float = 30.0
    """A watch's socket read timeout is its server-side ``timeoutSeconds`` plus this."""
    watch_answer_timeout: float = 30.0
    """Seconds for a watch's status line and headers, which the server sends at once (the
    watch's inactivity timeout when that is shorter)."""
    max_attempts: int = 5
    """Tries per request, the first included."""
    backoff_base: float = 0.2
    """Delay before the first retry; doubles per retry."""
    backoff_max: float = 5.0
    """Cap of the exponential part of the delay."""
    max_retry_after: float = 30.0
    """Cap on one sleep asked for by ``Retry-After``; a server asking more gets an error."""


def retry_delay(*, attempt: int, settings: ApiSettings, retry_after: float | None) -> float:
    """Seconds to wait before retry number ``attempt`` (1-based): jitter in [50 %, 100 %]."""
    exp = min(settings.backoff_max, settings.backoff_base * 2.0 ** (attempt - 1))
    delay = exp * random.uniform(0.5, 1.0)
    if retry_after is not None:
        delay = max(delay, min(retry_after, settings.max_retry_after))
    return delay


def should_retry_status(*, method: str, status: int) -> bool:
    if status == 429:
        return True
    return status in _RETRY_STATUSES and method in _IDEMPOTENT


def should_retry_exception(*, method: str, exc: BaseException) -> bool:
    if method in _IDEMPOTENT:
        return isinstance(exc, HttpError | TimeoutError)
    # Only a failed connect proves a POST never reached the server.
    return isinstance(exc, ConnectFailed)
