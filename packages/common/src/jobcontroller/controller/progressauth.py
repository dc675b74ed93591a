"""Who may report a job's progress: a pod of that job, proven by its projected
service-account token.

Upstream (v2.3.0 pkg/statusserver/auth.go) verifies the token itself, as an OIDC ID token
against the cluster's issuer, and checks its audience (the TrainJob's, see
:meth:`~jobcontroller.core.progress.ProgressTarget.audience`) and namespace. Here the API
server verifies it: a TokenReview with that audience checks the signature, expiry and
audience, and, for a pod-bound token, that its pod still exists. The pod it names must then be
one of the job's, as the kind's :data:`PodCheck` says (a TrainJob's: labelled with its JobSet's
name and uid; a v1 job's: labelled with its name and controlled by it), where upstream accepts
any pod of the namespace holding such a token.

Work is bounded whatever the callers send: a request whose token is not a JWT, is expired, or
names another audience is refused before any API call; verdicts are cached per (token,
job), an acceptance until the token expires (upstream, checking tokens locally, accepts a
token until then too, its pod gone or not), a refusal for a minute, in a bounded LRU; and at
most :data:`MAX_REVIEWS_IN_FLIGHT` reviews run at once (more are told to retry: 429).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import structlog
from msgspec import Struct

from jobcontroller.core.progress import ProgressTarget
from jobcontroller.runtime.kube import PODS, ApiError, KubeApi, Resource

__all__ = ["TOKEN_REVIEWS", "PodCheck", "TokenAuthorizer", "Verdict", "bearer_token"]

log = structlog.get_logger(__name__)

Obj = dict[str, Any]

TOKEN_REVIEWS = Resource(
    "authentication.k8s.io", "v1", "TokenReview", "tokenreviews", namespaced=False
)
POD_NAME_EXTRA = "authentication.kubernetes.io/pod-name"
POD_UID_EXTRA = "authentication.kubernetes.io/pod-uid"

CACHE_SECONDS = 60.0
"""How long a refusal is reused."""
MAX_ALLOWED_SECONDS = 3600.0
"""How long an acceptance is reused at most (never past the token's expiry): a pod reporting
every few seconds costs one review and one pod read per token (the kubelet renews it after
about 48 of its 60 minutes), not one a minute."""
MAX_CACHED = 4096
MAX_REVIEWS_IN_FLIGHT = 8


class Verdict(Struct, frozen=True):
    """200 (allowed), 401 (not authenticated), 403 (not this job's pod), 429, 500."""

    code: int
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.code == 200


ALLOWED = Verdict(200)


def bearer_token(header: str | None) -> str:
    """The credential of an RFC 7235 ``Bearer`` Authorization header ("" when there is not
    exactly one), the scheme matched case-insensitively, as upstream's ``extractRawToken``."""
    parts = (header or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return ""
    return parts[1]


def _claims(token: str) -> Obj | None:
    """The JWT's payload, unverified: only to refuse junk before asking the API server."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
        claims = json.loads(payload)
    except (ValueError, UnicodeDecodeError):
        return None
    return claims if isinstance(claims, dict) else None


def _precheck(claims: Obj | None, audience: str, now: float) -> Verdict | None:
    if claims is None:
        return Verdict(401, "the bearer token is not a JWT")
    aud = claims.get("aud")
    audiences = aud if isinstance(aud, list) else [aud]
    if audience not in audiences:
        return Verdict(403, f"the token's audience is not {audience}")
    exp = claims.get("exp")
    if isinstance(exp, int | float) and exp <= now:
        return Verdict(401, "the token has expired")
    return None


PodCheck = Callable[[str, str, Obj], bool]
"""``(namespace, job name, pod) -> whether the pod is one of that job's``."""


class TokenAuthorizer:
    """Decides whether a request may report the progress of one job; the kinds' pod checks
    are registered with :meth:`add_kind` (one authorizer, one review bound, for all)."""

    def __init__(
        self,
        *,
        api: KubeApi,
        clock: Callable[[], float] = time.time,
        max_cached: int = MAX_CACHED,
        in_flight: int = MAX_REVIEWS_IN_FLIGHT,
    ) -> None:
        self._api = api
        self._pod_checks: dict[ProgressTarget, PodCheck] = {}
        self._clock = clock
        self._max_cached = max_cached
        self._cache: OrderedDict[tuple[str, str], tuple[float, Verdict]] = OrderedDict()
        self._reviews = asyncio.Semaphore(in_flight)
        self.reviews = 0
        """TokenReviews sent (for tests and the curious)."""

    def add_kind(self, target: ProgressTarget, pod_check: PodCheck) -> None:
        self._pod_checks[target] = pod_check

    async def authorize(
        self, header: str | None, target: ProgressTarget, namespace: str, name: str
    ) -> Verdict:
        if target not in self._pod_checks:
            return Verdict(404, f"{target.kind} progress is not served here")
        token = bearer_token(header)
        if not token:
            return Verdict(401, "a bearer token (a projected service-account token) is required")
        now = self._clock()
        claims = _claims(token)
        audience = target.audience(namespace, name)
        early = _precheck(claims, audience, now)
        if early is not None:
            return early
        key = (hashlib.sha256(token.encode()).hexdigest(), audience)
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            self._cache.move_to_end(key)
            return cached[1]
        if self._reviews.locked():
            return Verdict(429, "too many token reviews in flight; retry")
        async with self._reviews:
            verdict = await self._review(token, target, namespace, name)
        if verdict.code in (200, 401, 403):
            # Allowed: until the token expires (an hour at most), as upstream's local check
            # accepts it; refused: a minute, so that a fixed cause is seen.
            until = now + (MAX_ALLOWED_SECONDS if verdict.allowed else CACHE_SECONDS)
            exp = (claims or {}).get("exp")
            if isinstance(exp, int | float):
                until = min(until, float(exp))
            self._remember(key, until, verdict)
        return verdict

    def _remember(self, key: tuple[str, str], until: float, verdict: Verdict) -> None:
        self._cache[key] = (until, verdict)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_cached:
            self._cache.popitem(last=False)

    async def _review(
        self, token: str, target: ProgressTarget, namespace: str, name: str
    ) -> Verdict:
        self.reviews += 1
        audience = target.audience(namespace, name)
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token, "audiences": [audience]},
        }
        try:
            review = await self._api.create(TOKEN_REVIEWS, body)
        except ApiError as exc:
            log.warning("token review failed", status=exc.status, error=str(exc))
            return Verdict(500, "the token could not be reviewed")
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return Verdict(401, f"the token was not accepted: {status.get('error') or 'invalid'}")
        user = status.get("user") or {}
        username = str(user.get("username") or "")
        prefix = f"system:serviceaccount:{namespace}:"
        if not username.startswith(prefix):
            return Verdict(403, f"the token is not a service account's of namespace {namespace}")
        extra = user.get("extra") or {}
        pod_names = extra.get(POD_NAME_EXTRA) or []
        pod_uids = extra.get(POD_UID_EXTRA) or []
        if len(pod_names) != 1 or len(pod_uids) != 1:
            return Verdict(403, "the token is not bound to a pod")
        return await self._pod_verdict(target, namespace, name, str(pod_names[0]), str(pod_uids[0]))

    async def _pod_verdict(
        self, target: ProgressTarget, namespace: str, name: str, pod_name: str, uid: str
    ) -> Verdict:
        try:
            pod = await self._api.get(PODS, pod_name, namespace=namespace)
        except ApiError as exc:
            if exc.status == 404:
                return Verdict(403, f"pod {pod_name} is gone")
            log.warning("reading a reporting pod failed", pod=pod_name, status=exc.status)
            return Verdict(500, "the token's pod could not be read")
        meta = pod.get("metadata") or {}
        check = self._pod_checks[target]
        if meta.get("uid") != uid or not check(namespace, name, pod):
            return Verdict(403, f"pod {pod_name} is not a pod of {target.kind} {namespace}/{name}")
        return ALLOWED
