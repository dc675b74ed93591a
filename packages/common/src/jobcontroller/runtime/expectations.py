"""Expectations: remembering writes the informer has not shown us yet.

A reconcile reads pods and services from the informer cache, and the cache lags the API. Right
after creating a job's worker pods, the next reconcile (triggered by any event) would still see
them missing and create them again. So before each create or delete the controller records an
*expectation* under a key (``<ns>/<job>/<rtype>/pods`` or ``.../services``); informer handlers
mark each one *observed*; and reconciles of that job wait until :meth:`Expectations.satisfied`.
This is kubeflow/common's (and the ReplicaSet controller's) ``ControllerExpectations``.

Its known failure is a stall: an expectation that is never observed blocks the job. kubeflow
issue #1306 showed pods blocked until the five-minute expiry, and the training-operator papered
over it by resetting every expectation at the start of each reconcile, which weakens the gate to
nothing. This version keeps the gate strong and removes the ways it can stall:

* a create or delete that *failed* at the API is taken back with
  :meth:`~Expectations.lower_creations` / :meth:`~Expectations.lower_deletions` (the informer
  will never report it);
* a record older than ``timeout`` (default 300 s, as upstream) counts as satisfied, is dropped and
  counted in :attr:`ExpectationsStatistics.expired_total`, because events can be lost (a watch
  gap healed by a relist only shows the final state);
* counters never go below zero, so an event nobody expected (an adoption, a duplicate delivery)
  cannot pre-pay a later expectation and let a reconcile run before its own writes are visible;
* raising on a fulfilled or expired record starts from zero, so stale debt is not carried into a
  new round of writes;
* a fulfilled record is removed, so memory follows only keys with pending writes.

Single event loop, no locks. The clock is injectable and must be monotonic.
"""

from __future__ import annotations

import structlog
from msgspec import Struct

from jobcontroller.runtime.clock import Clock, monotonic

__all__ = ["DEFAULT_EXPECTATIONS_TIMEOUT", "Expectations", "ExpectationsStatistics"]

#: Upstream's ``ExpectationsTimeout``: long enough for a slow informer, short enough to recover.
DEFAULT_EXPECTATIONS_TIMEOUT = 300.0

log = structlog.get_logger(__name__)


class _Record(Struct):
    creations: int
    deletions: int
    #: When writes were last expected; the expiry counts from the latest promise, as upstream's
    #: per-reconcile ``SetExpectations`` does, so a key that is still being written to stays gated.
    since: float

    def fulfilled(self) -> bool:
        return self.creations <= 0 and self.deletions <= 0


class ExpectationsStatistics(Struct, frozen=True):
    """A snapshot of an :class:`Expectations` cache."""

    #: Keys with writes not yet observed (expired ones included until next checked).
    pending_keys: int
    creations_pending: int
    deletions_pending: int
    #: Age of the oldest pending record, in seconds (0 if none).
    oldest_pending_seconds: float
    creations_observed_total: int
    deletions_observed_total: int
    #: Expectations taken back because the write failed.
    lowered_total: int
    #: Records given up on after ``timeout``: each one is an event the controller never saw.
    expired_total: int


class Expectations:
    """Per-key counts of creations and deletions awaiting their informer events."""

    def __init__(
        self, *, timeout: float = DEFAULT_EXPECTATIONS_TIMEOUT, clock: Clock = monotonic
    ) -> None:
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        self._timeout = timeout
        self._clock = clock
        self._records: dict[str, _Record] = {}
        self._creations_observed = 0
        self._deletions_observed = 0
        self._lowered = 0
        self._expired = 0

    def clear(self) -> None:
        """Drop every record (a new leadership term: nothing in flight is ours any more)."""
        self._records.clear()

    @property
    def timeout(self) -> float:
        """Seconds after which a pending record counts as satisfied (and is dropped)."""
        return self._timeout

    # -- before writing ---------------------------------------------------------------------

    def expect_creations(self, key: str, n: int) -> None:
        """Record ``n`` creations about to be sent; call it *before* the API call, so the
        informer event cannot arrive first."""
        self._raise(key, creations=n, deletions=0)

    def expect_deletions(self, key: str, n: int) -> None:
        """Record ``n`` deletions about to be sent; call it before the API call."""
        self._raise(key, creations=0, deletions=n)

    # -- after writing ----------------------------------------------------------------------

    def creation_observed(self, key: str) -> None:
        """The informer showed one created object of ``key``."""
        self._creations_observed += 1
        self._lower(key, creations=1, deletions=0)

    def deletion_observed(self, key: str) -> None:
        """The informer showed one deleted object of ``key``."""
        self._deletions_observed += 1
        self._lower(key, creations=0, deletions=1)

    def lower_creations(self, key: str, n: int = 1) -> None:
        """Take back ``n`` creations that failed at the API and so will never be observed.

        A create that timed out may still have happened: leave that one to the informer (or to
        the expiry), as upstream does.
        """
        self._check_count(n)
        self._lowered += n
        self._lower(key, creations=n, deletions=0)

    def lower_deletions(self, key: str, n: int = 1) -> None:
        """Take back ``n`` deletions that failed, including 404s: an object already gone was
        reported deleted before we expected it, so no event will count against this one."""
        self._check_count(n)
        self._lowered += n
        self._lower(key, creations=0, deletions=n)

    # -- gating -----------------------------------------------------------------------------

    def satisfied(self, key: str) -> bool:
        """Whether a reconcile may trust the cache for ``key``.

        True with no record, when every expected write was observed, or when the record is older
        than the timeout (it is then dropped and logged: something was lost, and re-planning
        from the cache is the only way forward).
        """
        record = self._records.get(key)
        if record is None:
            return True
        if self._clock() - record.since >= self._timeout:
            del self._records[key]
            self._expired += 1
            log.warning(
                "expectations expired",
                key=key,
                creations_pending=record.creations,
                deletions_pending=record.deletions,
                timeout=self._timeout,
            )
            return True
        return False

    def pending(self, key: str) -> tuple[int, int]:
        """(creations, deletions) still expected for ``key``; for logs and tests."""
        record = self._records.get(key)
        return (0, 0) if record is None else (record.creations, record.deletions)

    def delete(self, key: str) -> None:
        """Forget ``key`` entirely, e.g. when its job is deleted."""
        self._records.pop(key, None)

    def __len__(self) -> int:
        return len(self._records)

    def statistics(self) -> ExpectationsStatistics:
        now = self._clock()
        records = self._records.values()
        return ExpectationsStatistics(
            pending_keys=len(self._records),
            creations_pending=sum(r.creations for r in records),
            deletions_pending=sum(r.deletions for r in records),
            oldest_pending_seconds=max((now - r.since for r in records), default=0.0),
            creations_observed_total=self._creations_observed,
            deletions_observed_total=self._deletions_observed,
            lowered_total=self._lowered,
            expired_total=self._expired,
        )

    # -- internals --------------------------------------------------------------------------

    @staticmethod
    def _check_count(n: int) -> None:
        if n < 0:
            raise ValueError(f"count must be >= 0, got {n}")

    def _raise(self, key: str, *, creations: int, deletions: int) -> None:
        self._check_count(creations)
        self._check_count(deletions)
        if creations == 0 and deletions == 0:
            return
        now = self._clock()
        record = self._records.get(key)
        if record is None or now - record.since >= self._timeout:
            # Nothing pending (fulfilled records are removed) or stale debt: a fresh round.
            if record is not None:
                self._expired += 1
            self._records[key] = _Record(creations, deletions, since=now)
            return
        record.creations += creations
        record.deletions += deletions
        record.since = now

    def _lower(self, key: str, *, creations: int, deletions: int) -> None:
        record = self._records.get(key)
        if record is None:
            return
        record.creations = max(0, record.creations - creations)
        record.deletions = max(0, record.deletions - deletions)
        if record.fulfilled():
            del self._records[key]
