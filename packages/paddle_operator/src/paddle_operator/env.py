"""The environment ``paddle.distributed.launch`` reads, as v1.9's ``envvar.go`` sets it.

Every container of every pod gets, in this order (init containers get nothing):

- ``PYTHONUNBUFFERED=1``, ``PADDLE_JOB_ID=<job name>``, ``PADDLE_NNODES=<all replicas>``;
- **collective mode** (no Master): worker 0 gets ``POD_IP_DUMMY`` (its own pod IP, from the
  downward API) and ``PADDLE_MASTER=$(POD_IP_DUMMY):<port>``; every other worker
  ``PADDLE_MASTER=<job>-worker-0:<port>``, the port being the Worker's ``master`` port;
- **parameter-server mode** (a Master): master 0 gets ``POD_IP_DUMMY`` and
  ``PADDLE_MASTER=$(POD_IP_DUMMY):<port>``, every other pod ``PADDLE_MASTER=<job>-master-0:<port>``
  with the Master's port; then each master ``PADDLE_SERVER_NUM=1`` and each worker
  ``PADDLE_TRAINER_NUM=1`` (one server or trainer per pod).

The operator's values win over the user's, as in v1.9 (which appends its own after the
user's, and the kubelet takes the last definition). Unlike v1.9, the user's definition is
dropped rather than shadowed, so the pod carries one definition of each name.
"""

from __future__ import annotations

from typing import Any

from jobcontroller.api import replica_port
from paddle_operator.api import (
    PADDLE_PORT,
    PADDLE_PORT_NAME,
    PaddleJob,
    PaddleReplicaType,
)

__all__ = ["POD_IP_VAR", "pod_env"]

#: envvar.go's name for the pod's own IP, referenced by PADDLE_MASTER.
POD_IP_VAR = "POD_IP_DUMMY"

_MASTER = PaddleReplicaType.MASTER
_WORKER = PaddleReplicaType.WORKER


def _var(name: str, value: str) -> dict[str, Any]:
    return {"name": name, "value": value}


def pod_env(job: PaddleJob, *, rtype: str, index: int) -> list[dict[str, Any]]:
    """The variables of replica ``rtype``/``index`` of a defaulted job, in v1.9's order."""
    specs = job.spec.paddle_replica_specs
    total = sum(spec.replicas or 0 for spec in specs.values())
    env = [
        _var("PYTHONUNBUFFERED", "1"),
        _var("PADDLE_JOB_ID", job.name),
        _var("PADDLE_NNODES", str(total)),
    ]
    # Collective mode rendezvouses at worker 0, parameter-server mode at master 0.
    leader = _MASTER if _MASTER in specs else _WORKER
    port = replica_port(job, leader, port_name=PADDLE_PORT_NAME, default=PADDLE_PORT)
    if rtype == leader and index == 0:
        env += [
            {"name": POD_IP_VAR, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            _var("PADDLE_MASTER", f"$({POD_IP_VAR}):{port}"),
        ]
    else:
        env.append(_var("PADDLE_MASTER", f"{job.name}-{leader.lower()}-0:{port}"))
    if leader == _MASTER:
        env.append(_var("PADDLE_SERVER_NUM" if rtype == _MASTER else "PADDLE_TRAINER_NUM", "1"))
    return env
