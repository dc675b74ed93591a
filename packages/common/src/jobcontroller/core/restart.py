"""What to do with a failed pod, and how many times the job has restarted (backoffLimit).

The anchor counts only the kubelet's in-place restarts (``restartCount``) of Running pods, so
failures that make the operator recreate a pod (every ExitCode restart, any eviction) never
reach ``backoffLimit`` and such jobs retry forever (kubeflow/trainer #2045). Recreations leave
no trace on the cluster once the old pod is gone, so the job carries a small ledger in two
annotations, written by a merge patch planned together with the deletion it accounts for:

``training.kubeflow.org/restart-count``
    restarts of pods that no longer exist: one per recreation plus the in-place restarts the
    recreated pod had accumulated. A user may edit or remove it to grant more retries.
``training.kubeflow.org/restarted-pods``
    JSON ``{pod name: uid}`` of the last pod recorded per slot. It makes recording idempotent:
    if the patch lands and the deletion fails, the next plan sees the same pod again and does
    not count it twice (nor emit a second Restarting event).

restarts = ledger count + in-place restarts of live pods not yet recorded + this plan's new
recreations, over replica types whose policy restarts (OnFailure, Always, ExitCode). The
comparison is the anchor's: more than 0 when the limit is 0, else at least the limit.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from enum import StrEnum

from msgspec import Struct, field

from jobcontroller.api.common import RestartPolicy
from jobcontroller.core.names import RESTART_COUNT_ANNOTATION, RESTARTED_PODS_ANNOTATION
from jobcontroller.core.replicas import is_retryable, restart_count
from jobcontroller.core.types import Obj

__all__ = [
    "RESTARTING_POLICIES",
    "FailedPodVerdict",
    "RestartLedger",
    "failed_pod_verdict",
    "past_backoff_limit",
    "pod_restart_policy",
]

#: Replica restart policies under which a failure leads to a retry, so it counts to the limit.
RESTARTING_POLICIES = frozenset(
    {RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS, RestartPolicy.EXIT_CODE}
)


class FailedPodVerdict(StrEnum):
    KEEP = "keep"
    """Leave the pod; the framework's status rule decides (Never, or no recreation allowed)."""
    RESTART = "restart"
    """Delete it so the next plan creates a fresh pod in its slot."""
    FAIL_JOB = "fail-job"
    """ExitCode policy with a permanent (1-127) exit code: the job has failed."""


def failed_pod_verdict(
    *, policy: RestartPolicy | None, exit_code: int, may_recreate: bool
) -> FailedPodVerdict:
    """The fate of a pod in phase Failed under its replica's restart policy."""
    if policy == RestartPolicy.EXIT_CODE:
        if not is_retryable(exit_code):
            return FailedPodVerdict.FAIL_JOB
        return FailedPodVerdict.RESTART if may_recreate else FailedPodVerdict.KEEP
    if policy in (RestartPolicy.ON_FAILURE, RestartPolicy.ALWAYS) and may_recreate:
        return FailedPodVerdict.RESTART
    return FailedPodVerdict.KEEP


def pod_restart_policy(policy: RestartPolicy | None) -> str | None:
    """The pod-level restartPolicy for a replica policy: ExitCode is enforced by the operator,
    so its pods must never be restarted in place by the kubelet."""
    if policy is None:
        return None
    return "Never" if policy == RestartPolicy.EXIT_CODE else str(policy)


def past_backoff_limit(*, limit: int, restarts: int) -> bool:
    return restarts > 0 if limit == 0 else restarts >= limit


def _uid(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("uid") or "")


def _name(pod: Obj) -> str:
    return str((pod.get("metadata") or {}).get("name") or "")


class RestartLedger(Struct, frozen=True):
    """Restarts of pods that are gone, read from (and written to) the job's annotations."""

    count: int = 0
    pods: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, str]) -> RestartLedger:
        """Tolerant: a missing or hand-mangled annotation reads as zero / empty."""
        try:
            count = max(int(annotations.get(RESTART_COUNT_ANNOTATION, "0")), 0)
        except ValueError:
            count = 0
        try:
            raw = json.loads(annotations.get(RESTARTED_PODS_ANNOTATION, "{}"))
        except ValueError:
            raw = {}
        pods = {str(k): str(v) for k, v in raw.items()} if isinstance(raw, dict) else {}
        return cls(count=count, pods=pods)

    def recorded(self, pod: Obj) -> bool:
        uid = _uid(pod)
        return bool(uid) and self.pods.get(_name(pod)) == uid

    def live_restarts(self, pods: Iterable[Obj]) -> int:
        """In-place restarts of ``pods`` not already folded into :attr:`count`."""
        return sum(restart_count(pod) for pod in pods if not self.recorded(pod))

    def record(self, pods: Iterable[Obj]) -> RestartLedger:
        """The ledger after recreating ``pods`` (those already recorded are skipped)."""
        count = self.count
        entries = dict(self.pods)
        for pod in pods:
            if self.recorded(pod):
                continue
            count += 1 + restart_count(pod)
            entries[_name(pod)] = _uid(pod)
        return RestartLedger(count=count, pods=entries)

    def annotations(self) -> dict[str, str]:
        return {
            RESTART_COUNT_ANNOTATION: str(self.count),
            RESTARTED_PODS_ANNOTATION: json.dumps(
                dict(self.pods), sort_keys=True, separators=(",", ":")
            ),
        }
