"""The defaulting every job kind shares, as one pure function.

training-operator v1.9's ``SetDefaults_<Kind>`` functions all do the same five things; a
framework's ``set_defaults`` is :func:`default_job` plus whatever only it defaults::

    def set_defaults(self, job: XGBoostJob) -> XGBoostJob:
        return default_job(job, restart_policy=RestartPolicy.NEVER,
                           port_name="xgboostjob-port", port=9999)
"""

from __future__ import annotations

from typing import Any, TypeVar

from jobcontroller.api.common import CleanPodPolicy, JobModel, ReplicaSpec, RestartPolicy
from jobcontroller.api.deepcopy import deep_copy

__all__ = ["canonical_replica_types", "default_job", "replica_port", "set_default_port"]

JobT = TypeVar("JobT", bound=JobModel[Any])


def default_job(
    job: JobT,
    *,
    restart_policy: RestartPolicy,
    port_name: str | None = None,
    port: int | None = None,
    clean_pod_policy: CleanPodPolicy = CleanPodPolicy.NONE,
) -> JobT:
    """A defaulted deep copy of ``job``: ``runPolicy.cleanPodPolicy`` (``None`` unless
    given) and ``suspend`` (false) when absent; replica types renamed to their canonical case
    (``master`` -> ``Master``, from the model's ``REPLICA_TYPES``); in every replica spec
    ``replicas`` 1 and ``restartPolicy`` when absent; and, with ``port_name`` and ``port``, that
    port on the model's default container (or the first) unless a port of that name exists.
    The input is never modified."""
    job = deep_copy(job)
    run_policy = job.spec.run_policy
    if run_policy.clean_pod_policy is None:
        run_policy.clean_pod_policy = clean_pod_policy
    if run_policy.suspend is None:
        run_policy.suspend = False
    specs = canonical_replica_types(job.replica_specs(), known=job.REPLICA_TYPES)
    job.spec.set_replica_specs(specs)
    for replica in specs.values():
        if replica.replicas is None:
            replica.replicas = 1
        if replica.restart_policy is None:
            replica.restart_policy = restart_policy
        if port_name is not None and port is not None:
            set_default_port(
                replica.template,
                container_name=job.DEFAULT_CONTAINER_NAME or "",
                port_name=port_name,
                port=port,
            )
    return job


def canonical_replica_types(
    specs: dict[str, ReplicaSpec], *, known: tuple[str, ...]
) -> dict[str, ReplicaSpec]:
    """Rename keys to their canonical case (`ps` -> `PS`); unknown keys are kept as given.

    The anchor's defaulters match replica types case-insensitively.
    """
    by_folded = {k.lower(): k for k in known}
    out: dict[str, ReplicaSpec] = {}
    for key, spec in specs.items():
        canonical = by_folded.get(key.lower(), key)
        # An exact canonical key wins over a case variant (validation rejects such pairs).
        if canonical not in out or key == canonical:
            out[canonical] = spec
    return out


def set_default_port(
    template: dict[str, Any], *, container_name: str, port_name: str, port: int
) -> None:
    """Append the framework port to its container (in place) when no port of that name exists.

    Falls back to container 0 when no container has the framework's name, as the anchor does:
    the per-replica Services expose the default container's named ports.
    """
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, dict) else None
    if not isinstance(containers, list) or not containers:
        return
    target = next(
        (c for c in containers if isinstance(c, dict) and c.get("name") == container_name),
        containers[0],
    )
    if not isinstance(target, dict):
        return
    ports = target.get("ports")
    if not isinstance(ports, list):
        ports = target["ports"] = []
    if not any(isinstance(p, dict) and p.get("name") == port_name for p in ports):
        ports.append({"name": port_name, "containerPort": port})


def replica_port(job: JobModel[Any], rtype: str, *, port_name: str, default: int) -> int:
    """The ``containerPort`` of the port named ``port_name`` on the model's default container
    of ``rtype``'s template (the one :func:`set_default_port` fills), as v1.9's
    ``getPortFrom<Kind>Job`` reads it: the first port of that name wins, whatever its number;
    ``default`` when the replica type, that container or that port is missing. Only a
    container of the default name is read, as in v1.9, even where defaulting put the port on
    the first container."""
    spec = job.replica_specs().get(rtype)
    pod_spec = spec.template.get("spec") if spec is not None else None
    containers = pod_spec.get("containers") if isinstance(pod_spec, dict) else None
    for container in containers if isinstance(containers, list) else []:
        if not isinstance(container, dict) or container.get("name") != job.DEFAULT_CONTAINER_NAME:
            continue
        for port in container.get("ports") or []:
            if isinstance(port, dict) and port.get("name") == port_name:
                return int(port.get("containerPort") or 0)
    return default
