"""What the user may do to a job, asked of the API server before the page offers it.

A job's page offers suspend and resume (a ``patch``) and delete only when a
SelfSubjectAccessReview says the user may; otherwise the buttons are there, disabled, saying
why. The answers are cached per namespace, resource and verb for ``ttl`` seconds: a page's
summary is rendered on every change of the job, and RBAC changes rarely. The API server still
decides: a refused call (a binding removed meanwhile) shows its 403.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from kfjob.client import ApiFailure
from kfjob.ui.cluster import Cluster
from kfjob.ui.model import Permission, ServedKind

__all__ = ["ACTION_VERBS", "Access"]

#: The verb each action needs.
ACTION_VERBS = {"suspend": "patch", "resume": "patch", "delete": "delete"}


class Access:
    def __init__(
        self,
        cluster: Cluster,
        *,
        ttl: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.cluster = cluster
        self.ttl = ttl
        self.clock = clock
        self.asked = 0
        """SelfSubjectAccessReviews sent (the cache's misses)."""
        self._lock = threading.Lock()
        self._cache: dict[tuple[str, str, str], tuple[float, Permission]] = {}

    def permission(self, kind: ServedKind, namespace: str, verb: str) -> Permission:
        key = (namespace, f"{kind.plural}.{kind.group}", verb)
        now = self.clock()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        answer = self._ask(kind, namespace, verb)
        with self._lock:
            self.asked += 1
            # Forget what expired: the cache holds what pages asked about lately, no more.
            for stale in [k for k, (until, _) in self._cache.items() if until <= now]:
                del self._cache[stale]
            self._cache[key] = (now + self.ttl, answer)
        return answer

    def actions(self, kind: ServedKind, namespace: str) -> dict[str, Permission]:
        """Per action of a job's page, whether the user may."""
        by_verb = {v: self.permission(kind, namespace, v) for v in set(ACTION_VERBS.values())}
        return {action: by_verb[verb] for action, verb in ACTION_VERBS.items()}

    def _ask(self, kind: ServedKind, namespace: str, verb: str) -> Permission:
        what = f"{verb} {kind.plural}.{kind.group} in namespace {namespace}"
        # The page puts the action before it: "Delete: your RBAC does not let you ...".
        try:
            allowed, reason = self.cluster.may(
                namespace=namespace, group=kind.group, resource=kind.plural, verb=verb
            )
        except ApiFailure as exc:
            return Permission(None, f"could not ask whether you may {what}: {exc.message}")
        if allowed:
            return Permission(True)
        return Permission(
            False, f"your RBAC does not let you {what}" + (f" ({reason})" if reason else "") + "."
        )
