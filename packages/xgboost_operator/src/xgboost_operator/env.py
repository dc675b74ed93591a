"""The environment XGBoost's Rabit tracker and workers (and LightGBM) read, as v1.9 sets it.

v1.9's ``SetPodEnv`` (pkg/controller.v1/xgboost/xgboost.go) gives every container of every pod
(not init containers), in this order:

- ``MASTER_PORT``: the Master's ``xgboostjob-port`` (on its ``xgboost`` container);
- ``MASTER_ADDR``: ``<job>-master-0``, a short name resolved through the pod's DNS search path
  (the master's headless Service);
- ``WORLD_SIZE``: the replicas of all types added up;
- ``RANK``: the master 0, worker i ``i + <Master replicas>``;
- ``PYTHONUNBUFFERED=1``;
- when the world is larger than one, for LightGBM: ``WORKER_PORT``, the Worker's
  ``xgboostjob-port``, and ``WORKER_ADDRS``, ``<job>-worker-0,...`` (WORLD_SIZE - 1 names).

The operator's values win over the user's, as in v1.9, which appends its own after the user's
(the kubelet takes the last definition); ours drops the user's definition instead of shadowing
it, so the pod carries one definition of each name.
"""

from __future__ import annotations

from jobcontroller import listed_names_bytes
from jobcontroller.api import replica_port
from xgboost_operator.api import (
    XGBOOST_PORT,
    XGBOOST_PORT_NAME,
    XGBoostJob,
    XGBoostReplicaType,
)

__all__ = ["pod_env", "worker_addrs_bytes", "world_size"]

_MASTER = XGBoostReplicaType.MASTER
_WORKER = XGBoostReplicaType.WORKER


def _port(job: XGBoostJob, rtype: str) -> int:
    """The ``xgboostjob-port`` of ``rtype``'s ``xgboost`` container. The defaulter puts it
    there, so the fallback (9999) is only for a type the job lacks (validation refuses such
    jobs)."""
    return replica_port(job, rtype, port_name=XGBOOST_PORT_NAME, default=XGBOOST_PORT)


def world_size(job: XGBoostJob) -> int:
    return sum(spec.replicas or 0 for spec in job.spec.xgb_replica_specs.values())


def _name(job: XGBoostJob, rtype: str, index: int) -> str:
    return f"{job.name}-{rtype.lower()}-{index}".replace("/", "-")


def worker_addrs_bytes(job: XGBoostJob) -> int:
    """The length of WORKER_ADDRS (WORLD_SIZE - 1 names), without building it: O(1)."""
    total = world_size(job)
    if total <= 1:
        return 0
    return listed_names_bytes(
        prefix=_name(job, _WORKER, 0).removesuffix("0"), suffix="", count=total - 1, quote=0
    )


def pod_env(job: XGBoostJob, *, rtype: str, index: int) -> list[tuple[str, str]]:
    """The variables of replica ``rtype``/``index`` of a defaulted job, in v1.9's order."""
    rank = index
    if rtype.lower() == _WORKER.lower():
        master = job.spec.xgb_replica_specs.get(_MASTER)
        rank += (master.replicas or 0) if master is not None else 0
    total = world_size(job)
    env = [
        ("MASTER_PORT", str(_port(job, _MASTER))),
        ("MASTER_ADDR", _name(job, _MASTER, 0)),
        ("WORLD_SIZE", str(total)),
        ("RANK", str(rank)),
        ("PYTHONUNBUFFERED", "1"),
    ]
    if total > 1:
        addrs = ",".join(_name(job, _WORKER, i) for i in range(total - 1))
        env += [("WORKER_PORT", str(_port(job, _WORKER))), ("WORKER_ADDRS", addrs)]
    return env
