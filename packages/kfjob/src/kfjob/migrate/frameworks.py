"""Each v1 kind's migration, and the table that dispatches on the kind.

PyTorchJob, JAXJob and XGBoostJob map onto one ``node`` replicated job
(:mod:`kfjob.migrate.common`); MPIJob onto an MPI runtime with a ``launcher`` and ``node``
replicated jobs, shaped like upstream's deepspeed-distributed (which no install here ships, so
the migration always writes that TrainingRuntime).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from jax_operator.api import JAX_CONTAINER_NAME, JAX_PORT, JAX_PORT_NAME
from kfjob.kinds import UnknownKind, kind_of_document
from kfjob.migrate.base import (
    ANCESTOR_LABEL,
    GROUP,
    NODE,
    TRAINER_API_VERSION,
    Findings,
    MigrateError,
    Migration,
    split_template,
)
from kfjob.migrate.common import (
    Context,
    NodeSet,
    migrate_node_set,
    rank_env,
    run_policy,
    trainjob_body,
    trainjob_host,
)
from mpi_operator.api import DEFAULT_SSH_AUTH_MOUNT_PATH
from pytorch_operator.api import PYTORCH_CONTAINER_NAME, PYTORCH_PORT, PYTORCH_PORT_NAME
from trainer_operator.validate import TORCH_RESERVED, XGBOOST_RESERVED
from xgboost_operator.api import XGBOOST_CONTAINER_NAME, XGBOOST_PORT, XGBOOST_PORT_NAME

__all__ = ["FRAMEWORKS", "Framework", "migrate"]

Obj = dict[str, Any]

MPI_RESERVED = (
    "OMPI_MCA_orte_default_hostfile",
    "OMPI_MCA_orte_keep_fqdn_hostnames",
    "OMPI_MCA_orte_set_default_slots",
    "OMPI_MCA_plm_rsh_args",
)
SSHD = ["/usr/sbin/sshd", "-De"]
"""What mpi-operator runs in a worker whose container names no command."""


def _env(name: str, value: object) -> Obj:
    return {"name": name, "value": str(value)}


def _drop_reserved(ctx: Context, key: str, reserved: tuple[str, ...]) -> None:
    """Take the env a runtime reserves out of the framework containers' env (the TrainJob
    would be refused with it): the runtime sets those variables itself."""
    for rtype, spec in ((ctx.defaulted.get("spec") or {}).get(key) or {}).items():
        for c in ((spec.get("template") or {}).get("spec") or {}).get("containers") or ():
            kept = [e for e in c.get("env") or () if e.get("name") not in reserved]
            for e in c.get("env") or ():
                if e.get("name") in reserved:
                    ctx.findings.warn(
                        f"spec.{key}.{rtype}.template.spec.containers[{c.get('name')}].env"
                        f"[{e.get('name')}]",
                        "dropped: the runtime sets it (a TrainJob giving it is refused)",
                    )
            if c.get("env"):
                c["env"] = kept


# ------------------------------------------------------------------------------ PyTorchJob


def _nproc(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _torch_procs(ctx: Context) -> int | None:
    spec = ctx.source.get("spec") or {}
    given = spec.get("nprocPerNode")
    if given is None:
        given = (spec.get("elasticPolicy") or {}).get("nProcPerNode")
    if given is None or _nproc(given) is not None:
        return None if given is None else _nproc(given)
    if given != "auto":
        ctx.findings.warn(
            "spec.nprocPerNode",
            f"{given!r} is not carried: the TrainJob's default (auto) starts one process per "
            "GPU of resourcesPerNode, else one per requested CPU",
        )
    return None


def _torch_warnings(ctx: Context) -> None:
    elastic = (ctx.source.get("spec") or {}).get("elasticPolicy")
    if elastic:
        ctx.findings.warn(
            "spec.elasticPolicy",
            "not carried: a TrainJob has a fixed node count (numNodes, the replicas' sum); "
            "no elastic rendezvous, min/max replicas or autoscaling",
        )
    _drop_reserved(ctx, "pytorchReplicaSpecs", TORCH_RESERVED)


def _torch_env(ctx: Context, nodes: int, port: int) -> list[Obj]:
    spec = ctx.source.get("spec") or {}
    if spec.get("elasticPolicy") and "Master" not in (spec.get("pytorchReplicaSpecs") or {}):
        return []  # v1 gave elastic jobs without a Master no address, rank or world size
    procs = _torch_procs_quiet(spec)
    return [
        _env("PYTHONUNBUFFERED", "1"),
        _env("MASTER_PORT", port),
        _env("MASTER_ADDR", trainjob_host(ctx.name, 0)),
        _env("WORLD_SIZE", nodes * procs),
        rank_env("RANK"),
    ]


def _torch_procs_quiet(spec: Obj) -> int:
    """Processes per pod in v1's WORLD_SIZE: the number, else 1 (auto, cpu, gpu)."""
    return (
        _nproc(spec.get("nprocPerNode") or "")
        or _nproc((spec.get("elasticPolicy") or {}).get("nProcPerNode") or "")
        or 1
    )


PYTORCH = NodeSet(
    specs_key="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    container=PYTORCH_CONTAINER_NAME,
    port_name=PYTORCH_PORT_NAME,
    default_port=PYTORCH_PORT,
    runtime="torch-distributed",
    v1_env=_torch_env,
    num_proc_per_node=_torch_procs,
    kind_warnings=_torch_warnings,
)


# ------------------------------------------------------------------------------ JAXJob


def _jax_env(ctx: Context, nodes: int, port: int) -> list[Obj]:
    return [
        _env("PYTHONUNBUFFERED", "1"),
        _env("COORDINATOR_PORT", port),
        _env("COORDINATOR_ADDRESS", trainjob_host(ctx.name, 0)),
        _env("NUM_PROCESSES", nodes),
        rank_env("PROCESS_ID"),
    ]


JAX = NodeSet(
    specs_key="jaxReplicaSpecs",
    replica_types=("Worker",),
    container=JAX_CONTAINER_NAME,
    port_name=JAX_PORT_NAME,
    default_port=JAX_PORT,
    runtime="jax-distributed",
    v1_env=_jax_env,
)


# ------------------------------------------------------------------------------ XGBoostJob


def _xgboost_env(ctx: Context, nodes: int, port: int) -> list[Obj]:
    workers = ",".join(trainjob_host(ctx.name, i) for i in range(1, nodes))
    return [
        _env("MASTER_PORT", port),
        _env("MASTER_ADDR", trainjob_host(ctx.name, 0)),
        _env("WORLD_SIZE", nodes),
        rank_env("RANK"),
        _env("PYTHONUNBUFFERED", "1"),
        _env("WORKER_PORT", port),
        _env("WORKER_ADDRS", workers),
    ]


XGBOOST = NodeSet(
    specs_key="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    container=XGBOOST_CONTAINER_NAME,
    port_name=XGBOOST_PORT_NAME,
    default_port=XGBOOST_PORT,
    runtime="xgboost-distributed",
    v1_env=_xgboost_env,
    kind_warnings=lambda ctx: _drop_reserved(ctx, "xgbReplicaSpecs", XGBOOST_RESERVED),
)


# ------------------------------------------------------------------------------ MPIJob


def _mpi_template(ctx: Context, rtype: str, *, path: str) -> tuple[Obj, Obj]:
    """(trainer fields, pod template with the main container named ``node``) of a replica."""
    spec = ((ctx.defaulted.get("spec") or {}).get("mpiReplicaSpecs") or {})[rtype]
    split = split_template(spec.get("template") or {}, container=None, path=f"{path}.template")
    policy = spec.get("restartPolicy")
    if policy == "Never":
        split.template["spec"]["restartPolicy"] = "Never"
    elif policy not in (None, "OnFailure"):
        ctx.findings.warn(
            f"{path}.restartPolicy",
            f"{policy} has no TrainJob equivalent: the pods restart OnFailure (any exit code)",
        )
    return split.trainer, split.template


def _runs_as_root(template: Obj) -> bool:
    """Whether a pod template's first container runs as uid 0 (no runAsUser is taken as the
    image's user, most often root)."""
    pod = template.get("spec") or {}
    containers = pod.get("containers") or [{}]
    user = ((containers[0].get("securityContext") or {}).get("runAsUser")) or (
        (pod.get("securityContext") or {}).get("runAsUser")
    )
    return not user


def _migrate_mpi(ctx: Context) -> Migration:
    f = ctx.findings
    spec = ctx.defaulted.get("spec") or {}
    key = "spec.mpiReplicaSpecs"
    _drop_reserved(ctx, "mpiReplicaSpecs", MPI_RESERVED)
    trainer_fields, launcher = _mpi_template(ctx, "Launcher", path=f"{key}.Launcher")
    workers = int(((spec.get("mpiReplicaSpecs") or {}).get("Worker") or {}).get("replicas") or 0)
    as_worker = bool(spec.get("runLauncherAsWorker"))
    slots = int(spec.get("slotsPerWorker") or 1)
    impl = str(spec.get("mpiImplementation") or "OpenMPI")
    if impl != "OpenMPI":
        f.warn(
            "spec.mpiImplementation",
            f"{impl} is kept, but Trainer v2.3.0's mpi policy runs OpenMPI only: its TrainJob "
            "fails until the runtime says OpenMPI",
        )
    launcher["spec"]["containers"][0]["image"] = trainer_fields.get("image")
    launcher_rjob: Obj = {
        "name": "launcher",
        "template": {
            "metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
            "spec": {"template": launcher},
        },
    }
    if spec.get("launcherCreationPolicy") == "WaitForWorkersReady":
        launcher_rjob["dependsOn"] = [{"name": NODE, "status": "Ready"}]
    rjobs: list[Obj] = []
    if workers:
        worker_fields, node = _mpi_template(ctx, "Worker", path=f"{key}.Worker")
        container = node["spec"]["containers"][0]
        container.update(copy.deepcopy(worker_fields))
        if "resources" in container:
            container["resources"] = worker_fields["resources"]
        container.setdefault("command", SSHD)
        rjobs.append({"name": NODE, "template": {"spec": {"template": node}}})
    rjobs.append(launcher_rjob)
    num_nodes = workers + (1 if as_worker else 0)
    if any(_runs_as_root(rjob["template"]["spec"]["template"]) for rjob in rjobs):
        f.warn(
            "spec.mpiReplicaSpecs",
            "runs as root: Trainer v2.3.0's mpi policy mounts the SSH private key with mode "
            "0640, which ssh refuses for root; run the pods as a non-root user with fsGroup "
            "and sshd on a port it may bind, as the deepspeed-distributed runtime does",
        )
    rt_name = f"{ctx.name}-runtime"
    meta: Obj = {"name": rt_name, "labels": {"trainer.kubeflow.org/framework": "mpi"}}
    if ctx.namespace:
        meta["namespace"] = ctx.namespace
    mpi = {
        "numProcPerNode": slots,
        "mpiImplementation": impl,
        "sshAuthMountPath": str(spec.get("sshAuthMountPath") or DEFAULT_SSH_AUTH_MOUNT_PATH),
        "runLauncherAsNode": as_worker,
    }
    runtime: Obj = {
        "apiVersion": TRAINER_API_VERSION,
        "kind": "TrainingRuntime",
        "metadata": meta,
        "spec": {
            # 1, as deepspeed-distributed says: the launcher is the trainer's step, and a
            # trainer step runs mlPolicy.numNodes pods; the node job's count comes from the
            # TrainJob's numNodes (the mpi policy's rule).
            "mlPolicy": {"numNodes": 1, "mpi": mpi},
            "template": {
                "spec": {
                    "network": {"publishNotReadyAddresses": True},
                    "successPolicy": {"operator": "All", "targetReplicatedJobs": ["launcher"]},
                    "replicatedJobs": rjobs,
                }
            },
        },
    }
    trainer: Obj = {"numNodes": num_nodes, "numProcPerNode": slots}
    for field in ("image", "command", "args", "env"):
        if field in trainer_fields:
            trainer[field] = trainer_fields[field]
    if "resources" in trainer_fields:
        trainer["resourcesPerNode"] = trainer_fields["resources"]
    f.note(
        "spec.mpiReplicaSpecs",
        f"TrainingRuntime {rt_name} (mpi policy, shaped like upstream's deepspeed-distributed): "
        "the Worker template is its node job, the Launcher's its launcher job (the trainer)",
    )
    body = {
        "runtimeRef": {"apiGroup": GROUP, "kind": "TrainingRuntime", "name": rt_name},
        "trainer": trainer,
        **run_policy(ctx, "kubeflow.org/mpi-operator"),
    }
    return Migration(
        kind="MPIJob",
        name=ctx.name,
        source=ctx.source,
        trainjob=trainjob_body(ctx, body),
        runtime=runtime,
        warnings=tuple(f.warnings),
        notes=tuple(f.notes),
    )


# ------------------------------------------------------------------------------ dispatch


@dataclass(frozen=True, slots=True)
class Framework:
    """How one v1 kind migrates, and whether ``--check`` can plan its TrainJob."""

    convert: Callable[[Context], Migration]


def _node_set(kind: str, ns: NodeSet, managed_by: str) -> Framework:
    return Framework(lambda ctx: migrate_node_set(ctx, kind, ns, managed_by=managed_by))


FRAMEWORKS: dict[str, Framework] = {
    "PyTorchJob": _node_set("PyTorchJob", PYTORCH, "kubeflow.org/training-operator"),
    "JAXJob": _node_set("JAXJob", JAX, "kubeflow.org/training-operator"),
    "XGBoostJob": _node_set("XGBoostJob", XGBOOST, "kubeflow.org/training-operator"),
    "MPIJob": Framework(_migrate_mpi),
}


def migrate(doc: Obj, *, v1_env: bool = True) -> Migration:
    """The Trainer v2 objects doing what the v1 job ``doc`` does (module docstring)."""
    try:
        kind = kind_of_document(doc)
    except UnknownKind as exc:
        raise MigrateError(str(exc)) from exc
    framework = FRAMEWORKS.get(kind.kind)
    if framework is None:
        raise MigrateError(
            f"{kind.kind} has no Kubeflow Trainer v2 runtime to migrate to "
            f"(kfjob migrates {', '.join(FRAMEWORKS)})"
        )
    name = (doc.get("metadata") or {}).get("name")
    if not name:
        raise MigrateError(f"{kind.kind}: metadata.name: Required value (a TrainJob is named)")
    controller = kind.controller()
    try:
        job = controller.set_defaults(kind.model.parse(copy.deepcopy(doc)))
    except ValidationError as exc:
        why = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise MigrateError(f"{kind.kind} {name} would be refused: {why}") from exc
    errors = controller.validate(job)
    if errors:
        raise MigrateError(f"{kind.kind} {name} would be refused: {'; '.join(errors)}")
    ctx = Context(source=copy.deepcopy(doc), defaulted=job.to_dict(), findings=Findings())
    ctx.v1_env = v1_env
    return framework.convert(ctx)
