"""The environment ``jax.distributed.initialize`` reads, as v1.9's ``setPodEnv`` sets it.

Every container of every pod (not init containers) gets, in this order
(``pkg/controller.v1/jax/envvar.go``):

- ``PYTHONUNBUFFERED=1``
- ``COORDINATOR_PORT``: the ``jaxjob-port`` of the Worker's ``jax`` container (6666 by default)
- ``COORDINATOR_ADDRESS``: ``<job>-worker-0``, worker 0's headless Service, a short name that
  resolves through the pod's DNS search path
- ``NUM_PROCESSES``: the replicas of all replica types
- ``PROCESS_ID``: the pod's index

v1.9 appends these after the container's own variables, and the kubelet takes the last
definition of a name, so the operator's values win over a user's. Ours keep that outcome but
drop the user's definition instead of shadowing it, so a pod has one definition of each name.
"""

from __future__ import annotations

from jax_operator.api import JAX_PORT, JAX_PORT_NAME, JAXJob, JAXReplicaType
from jobcontroller.api import replica_port

__all__ = ["pod_env"]


def pod_env(job: JAXJob, *, index: int) -> list[tuple[str, str]]:
    """The variables for the pod at ``index`` of a defaulted job, in v1.9's order."""
    total = sum(spec.replicas or 0 for spec in job.spec.jax_replica_specs.values())
    # The Worker's jaxjob-port (getPortFromJAXJob); defaulting always puts one there.
    port = replica_port(job, JAXReplicaType.WORKER, port_name=JAX_PORT_NAME, default=JAX_PORT)
    return [
        ("PYTHONUNBUFFERED", "1"),
        ("COORDINATOR_PORT", str(port)),
        ("COORDINATOR_ADDRESS", f"{job.name}-worker-0"),
        ("NUM_PROCESSES", str(total)),
        ("PROCESS_ID", str(index)),
    ]
