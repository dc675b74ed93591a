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

from jax_operator.api import JAX_CONTAINER_NAME, JAX_PORT, JAX_PORT_NAME, JAXJob, JAXReplicaType

__all__ = ["coordinator_port", "pod_env"]


def coordinator_port(job: JAXJob) -> int:
    """The ``jaxjob-port`` of the Worker's ``jax`` container (``getPortFromJAXJob``).

    Defaulting always puts one there; v1.9 refuses to create pods without it, ours falls back
    to the default port.
    """
    spec = job.spec.jax_replica_specs.get(JAXReplicaType.WORKER)
    template = spec.template if spec is not None else {}
    for container in (template.get("spec") or {}).get("containers") or []:
        if container.get("name") != JAX_CONTAINER_NAME:
            continue
        for port in container.get("ports") or []:
            if port.get("name") == JAX_PORT_NAME and port.get("containerPort"):
                return int(port["containerPort"])
    return JAX_PORT


def pod_env(job: JAXJob, *, index: int) -> list[tuple[str, str]]:
    """The variables for the pod at ``index`` of a defaulted job, in v1.9's order."""
    total = sum(spec.replicas or 0 for spec in job.spec.jax_replica_specs.values())
    return [
        ("PYTHONUNBUFFERED", "1"),
        ("COORDINATOR_PORT", str(coordinator_port(job))),
        ("COORDINATOR_ADDRESS", f"{job.name}-worker-0"),
        ("NUM_PROCESSES", str(total)),
        ("PROCESS_ID", str(index)),
    ]
