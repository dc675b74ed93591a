"""Lease-based leader election (coordination.k8s.io/v1), so one replica reconciles at a time.

The algorithm is client-go's, with the fixes the Python ports lack:

* **Expiry is judged locally.** A candidate never compares the Lease's ``renewTime`` with its
  own clock (clocks of two pods may disagree by more than a lease). It remembers the monotonic
  time at which it last saw the Lease *change*; the lease is expired once
  ``leaseDurationSeconds`` have passed since then without another change.
* **Optimistic writes.** Every write is a PUT carrying the ``resourceVersion`` that was read, so
  of two candidates racing for an expired lease exactly one wins; a 409 means "not acquired".
* **Loss is detected before anyone can take over.** The leader must renew successfully within
  ``renew_deadline`` of its last successful renew (measured from when that request was sent,
  which is no later than when others saw it change). Since ``renew_deadline < lease_duration``,
  :meth:`LeaderElector.hold` raises :class:`LeadershipLost` while the lease is still ours, and
  the caller has ``lease_duration - renew_deadline`` seconds to stop its workers. It also raises
  at once when a read shows another holder.
* ``leaseTransitions`` is incremented whenever the holder changes, and :meth:`release` clears
  the holder (and shortens the duration to 1 s) so a successor need not wait out the lease. The
  caller releases only after its workers have stopped.
"""

from __future__ import annotations

import asyncio
import random
import socket
import uuid
from datetime import UTC, datetime
from typing import Any

import structlog
from msgspec import Struct, field

from jobcontroller.runtime.clock import Clock, monotonic
from jobcontroller.runtime.kube import LEASES, ApiError, KubeApi
from jobcontroller.runtime.metrics import Metrics

__all__ = ["LeaderElectionConfig", "LeaderElector", "LeadershipLost", "default_identity"]

log = structlog.get_logger(__name__)

#: Acquire attempts are spread by up to this fraction of the retry period (client-go's 1.2).
_JITTER = 0.2

#: Failures of one attempt that the next attempt may not have (the client's transport errors are
#: OSErrors); letting one escape would end renewing while workers still run.
_ATTEMPT_ERRORS = (ApiError, OSError, TimeoutError)


class LeadershipLost(Exception):
    """The lease could not be renewed in time or another replica holds it."""


def default_identity() -> str:
    """Hostname (the pod name in Kubernetes) plus a random suffix, unique per process."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


class LeaderElectionConfig(Struct, frozen=True, kw_only=True):
    """Where the Lease lives and the timing of the election (controller-runtime's defaults)."""

    namespace: str
    """Namespace of the Lease."""

    name: str
    """Name of the Lease; all replicas of one operator use the same."""

    identity: str = field(default_factory=default_identity)
    """This replica's holderIdentity."""

    lease_duration: float = 15.0
    """Seconds candidates wait after the lease last changed before taking it over."""

    renew_deadline: float = 10.0
    """Seconds the leader may go without a successful renew before it gives up."""

    retry_period: float = 2.0
    """Seconds between attempts."""

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if not self.renew_deadline > (1 + _JITTER) * self.retry_period:
            raise ValueError("renew_deadline must be greater than 1.2 * retry_period")


class LeaderElector:
    """Acquires, holds and releases one Lease for this process."""

    def __init__(
        self,
        api: KubeApi,
        config: LeaderElectionConfig,
        *,
        metrics: Metrics | None = None,
        clock: Clock = monotonic,
    ) -> None:
        self._api = api
        self.config = config
        self._clock = clock
        self._gauge = metrics.leader.labels(config.name) if metrics is not None else None
        if self._gauge is not None:
            self._gauge.set(0)
        self._lease: dict[str, Any] | None = None
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._is_leader = False
        self._last_renew = 0.0

    @property
    def is_leader(self) -> bool:
        """True from a successful acquire until the lease is lost or released."""
        return self._is_leader

    def holds_lease(self) -> bool:
        """Whether this replica may write as the leader at this instant: it leads, and its
        last successful renewal is recent enough that no other replica can have taken over.

        Stricter than :attr:`is_leader`, which stays True until the renew loop notices a loss;
        a replica frozen (SIGSTOP, a long GC pause) past its renew deadline holds nothing when
        it wakes, though its loop has not run yet.
        """
        return self._is_leader and self._clock() - self._last_renew < self.config.renew_deadline

    @property
    def identity(self) -> str:
        return self.config.identity

    # -- the loops ---------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return once this replica holds the lease; retries every retry period (jittered)."""
        cfg = self.config
        log.info(
            "waiting for leadership", lease=f"{cfg.namespace}/{cfg.name}", identity=self.identity
        )
        while True:
            try:
                async with asyncio.timeout(cfg.retry_period):
                    if await self.try_acquire_or_renew():
                        break
            except _ATTEMPT_ERRORS as exc:
                log.warning("lease acquire attempt failed", error=str(exc) or type(exc).__name__)
            await asyncio.sleep(cfg.retry_period * (1 + random.random() * _JITTER))
        transitions = ((self._lease or {}).get("spec") or {}).get("leaseTransitions", 0)
        log.info("became leader", lease=f"{cfg.namespace}/{cfg.name}", transitions=transitions)

    async def hold(self) -> None:
        """Renew every retry period while leader; raises :class:`LeadershipLost` on loss.

        Never returns normally: cancel it to stop renewing (then :meth:`release`).
        """
        cfg = self.config
        while True:
            await asyncio.sleep(cfg.retry_period)
            deadline = self._last_renew + cfg.renew_deadline
            while True:
                left = deadline - self._clock()
                if left <= 0:
                    self._lost("renew deadline passed")
                try:
                    async with asyncio.timeout(min(cfg.retry_period, left)):
                        if await self.try_acquire_or_renew():
                            break
                    self._lost(f"lease held by {self._holder()!r}")
                except _ATTEMPT_ERRORS as exc:
                    log.warning("lease renew failed", error=str(exc) or type(exc).__name__)
                await asyncio.sleep(min(cfg.retry_period / 4, max(0.0, deadline - self._clock())))

    async def release(self) -> None:
        """Give the lease up so a successor takes over at once. Best effort; never raises.

        Call only after this replica's workers have stopped.
        """
        if not self._is_leader or self._lease is None:
            return
        self._set_leader(False)
        lease = self._lease
        spec = dict(lease.get("spec") or {})
        now = _micro_time()
        spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=now, acquireTime=now)
        body = {**lease, "spec": spec}
        try:
            async with asyncio.timeout(self.config.retry_period):
                self._lease = await self._api.replace(LEASES, body, namespace=self.config.namespace)
        except _ATTEMPT_ERRORS as exc:
            log.warning("lease release failed; successor waits for expiry", error=str(exc))
        else:
            log.info("lease released", lease=f"{self.config.namespace}/{self.config.name}")

    # -- one attempt -------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: True if this replica holds the lease afterwards.

        A leader renews by PUT on the lease it last wrote (one request); only if that conflicts
        does it read the lease again. ApiErrors other than conflicts propagate.
        """
        cfg = self.config
        started = self._clock()
        if self._is_leader and self._lease is not None:
            try:
                await self._write(self._lease, started=started)
                return True
            except ApiError as exc:
                if not exc.is_conflict:
                    raise
        try:
            lease = await self._api.get(LEASES, cfg.name, namespace=cfg.namespace)
        except ApiError as exc:
            if not exc.is_not_found:
                raise
            return await self._create(started=started)
        self._observe(lease)
        holder = self._holder()
        if holder and holder != self.identity and not self._expired():
            return False
        if self._is_leader and holder != self.identity:
            return False  # someone else took it while we were not looking
        try:
            await self._write(lease, started=started)
        except ApiError as exc:
            if exc.is_conflict:
                return False
            raise
        return True

    async def _create(self, *, started: float) -> bool:
        cfg = self.config
        now = _micro_time()
        body = {
            "apiVersion": LEASES.api_version,
            "kind": LEASES.kind,
            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": _whole_seconds(cfg.lease_duration),
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        try:
            created = await self._api.create(LEASES, body, namespace=cfg.namespace)
        except ApiError as exc:
            if exc.is_already_exists:
                return False
            raise
        self._written(created, started=started)
        return True

    async def _write(self, lease: dict[str, Any], *, started: float) -> None:
        old = lease.get("spec") or {}
        now = _micro_time()
        spec = dict(old)
        spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=_whole_seconds(self.config.lease_duration),
            renewTime=now,
        )
        if old.get("holderIdentity") != self.identity:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        body = {**lease, "spec": spec}
        written = await self._api.replace(LEASES, body, namespace=self.config.namespace)
        self._written(written, started=started)

    # -- bookkeeping -------------------------------------------------------------------------

    def _written(self, lease: dict[str, Any], *, started: float) -> None:
        self._lease = lease
        self._observed_spec = lease.get("spec") or {}
        self._observed_at = started
        self._last_renew = started
        self._set_leader(True)

    def _observe(self, lease: dict[str, Any]) -> None:
        self._lease = lease
        spec = lease.get("spec") or {}
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = self._clock()

    def _expired(self) -> bool:
        spec = self._observed_spec or {}
        duration = float(spec.get("leaseDurationSeconds") or self.config.lease_duration)
        return self._clock() > self._observed_at + duration

    def _holder(self) -> str:
        return str((self._observed_spec or {}).get("holderIdentity") or "")

    def _set_leader(self, value: bool) -> None:
        self._is_leader = value
        if self._gauge is not None:
            self._gauge.set(1 if value else 0)

    def _lost(self, why: str) -> None:
        self._set_leader(False)
        log.error("leadership lost", why=why, lease=f"{self.config.namespace}/{self.config.name}")
        raise LeadershipLost(why)


def _micro_time() -> str:
    """A MicroTime as the API server writes it (RFC 3339, microseconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _whole_seconds(seconds: float) -> int:
    # leaseDurationSeconds is an integer; rounding up never shortens the promise to others.
    return max(1, int(-(-seconds // 1)))
