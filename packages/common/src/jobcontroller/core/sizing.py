"""How big a job's objects will be, known before any is built.

Some cluster env lists every replica: TF_CONFIG names every host of every type, XGBoost's
WORKER_ADDRS every worker. A pod of a 100,000-worker TFJob carries megabytes of it, more than
the API server can store (etcd's 1.5 MiB limit): such a job can never run, and building its
pods only to have them refused costs memory that grows with the job. Each framework therefore
states the size of what grows (:meth:`FrameworkOf.cluster_env_bytes`, arithmetic in the number
of replica types), and the base adds it to one real pod built for a one-or-two-replica copy of
the job: an estimate that is never below the real body and close to it, in O(template).

:func:`size_errors` refuses a job whose pods would be too large, before anything exists;
:func:`pod_bytes_hint` prices a pod for the byte budget of a reconcile (core/context.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from jobcontroller.api.common import JobModel
from jobcontroller.api.deepcopy import deep_copy
from jobcontroller.core.objects import build_pod
from jobcontroller.core.types import FrameworkOf, JobT, PlanConfig

__all__ = [
    "MAX_CONFIGMAP_BYTES",
    "SIZE_CHECK_FLOOR",
    "decimal_digits",
    "json_bytes",
    "listed_names_bytes",
    "pod_bytes_estimate",
    "pod_bytes_hint",
    "size_errors",
    "size_message",
]

#: The most data a ConfigMap may hold (the API server's validation): MPI's hostfile lives in one.
MAX_CONFIGMAP_BYTES = 1_048_576

#: Below this many bytes of growing env a pod cannot outgrow the API server's limit unless its
#: template alone nearly fills it (the job object holding that template is under the same
#: limit); the API server's refusal then fails the job (core/planner.py ``_creation_refused``).
#: Jobs under it skip the estimate's one pod build.
SIZE_CHECK_FLOOR = 64 * 2**10

#: A bound on what a bigger job adds outside the framework's growing env: wider numbers in the
#: pod name, the index label, the host name and the per-container counts (WORLD_SIZE, RANK...),
#: each at most 10 digits where the one-or-two-replica copy has 1.
_NUMBERS_PER_POD = 4
_NUMBERS_PER_CONTAINER = 8
_DIGITS = 10


def decimal_digits(count: int) -> int:
    """The digits written to spell 0, 1, ..., ``count - 1`` in decimal, in closed form."""
    total, width, low = 0, 1, 0
    while low < count:
        high = min(count, 10**width)
        total += (high - low) * width
        low, width = high, width + 1
    return total


def json_bytes(text: str) -> int:
    """The length of ``text`` as a JSON string body (quotes excluded), as json.dumps escapes
    it."""
    return len(json.dumps(text)) - 2


def listed_names_bytes(*, prefix: str, suffix: str, count: int, quote: int, sep: int = 1) -> int:
    """Bytes of ``count`` names ``<prefix><i><suffix>`` for i in 0..count-1, each wrapped in
    ``quote`` bytes on each side, ``sep`` bytes between them. Arithmetic: O(1)."""
    if count <= 0:
        return 0
    each = len(prefix) + len(suffix) + 2 * quote
    return count * each + decimal_digits(count) + (count - 1) * sep


def _containers(job: JobModel[Any], rtype: str) -> int:
    template = job.replica_specs()[rtype].template
    containers = (template.get("spec") or {}).get("containers") or []
    return max(len(containers), 1)


def _unit_copy(job: JobT) -> JobT:
    """The job with at most two replicas of each type: its pods are the real pods' shape with
    the growing env of a tiny job (two, so a job that is distributed stays distributed)."""
    unit = deep_copy(job)
    for spec in unit.replica_specs().values():
        spec.replicas = min(spec.replicas or 0, 2)
    return unit


def _compact_size(body: Any) -> int:
    return len(json.dumps(body, separators=(",", ":")))


def pod_bytes_estimate(fw: FrameworkOf[JobT], job: JobT, *, rtype: str, config: PlanConfig) -> int:
    """An upper bound (compact JSON bytes) of the largest pod of ``rtype``, close to it.

    One pod is built, for the last index of the job's one-or-two-replica copy; what the real
    job adds is the framework's growing env (its hook, for both) and wider numbers (a bound).
    Cost: O(template + replica types), whatever the replica count.
    """
    unit = _unit_copy(job)
    spec = unit.replica_specs()[rtype]
    index = max((spec.replicas or 0) - 1, 0)
    built = build_pod(fw, unit, rtype=rtype, index=index, spec=spec, config=config)
    grown = fw.cluster_env_bytes(job, rtype, config=config) - fw.cluster_env_bytes(
        unit, rtype, config=config
    )
    numbers = _NUMBERS_PER_POD + _NUMBERS_PER_CONTAINER * _containers(job, rtype)
    return _compact_size(built.body) + max(grown, 0) + numbers * (_DIGITS - 1)


def pod_bytes_hint(fw: FrameworkOf[JobT], job: JobT, *, rtype: str, config: PlanConfig) -> int:
    """A cheap price of one pod of ``rtype`` for the reconcile's byte budget: its template,
    its growing env and an allowance for the rest (labels, owner reference, fixed env)."""
    template = job.replica_specs()[rtype].template
    return _compact_size(template) + fw.cluster_env_bytes(job, rtype, config=config) + 2048


def size_message(*, what: str, size: int, limit: int, setting: str, why: str = "") -> str:
    """The words of a size refusal: which object, how big, which limit, by how much."""
    because = f": {why}" if why else ""
    return (
        f"{what} would be about {size:,} bytes, {size - limit:,} over the {limit:,}-byte "
        f"limit {setting}{because}"
    )


def size_errors(
    fw: FrameworkOf[JobT], job: JobT, *, rtypes: Iterable[str], config: PlanConfig
) -> list[str]:
    """Replica types whose pods could never be stored (``config.max_object_bytes``), each with
    its estimated size; [] when all fit or the check is off (a limit of 0)."""
    limit = config.max_object_bytes
    if limit <= 0:
        return []
    specs = job.replica_specs()
    errors: list[str] = []
    for rtype in rtypes:
        if rtype not in specs or not specs[rtype].replicas:
            continue
        if fw.cluster_env_bytes(job, rtype, config=config) < SIZE_CHECK_FLOOR:
            continue
        size = pod_bytes_estimate(fw, job, rtype=rtype, config=config)
        if size > limit:
            errors.append(
                size_message(
                    what=f"its {rtype} pods",
                    size=size,
                    limit=limit,
                    setting="of an object the API server stores (--max-object-bytes)",
                    why="their cluster env lists every replica of the job",
                )
            )
    return errors
