"""PyTorchJob, `kubeflow.org/v1`: model, defaulting, validation and CRD.

The replica rules are declared once, in `PyTorchJob.REPLICA_RULES`: the CRD's CEL and
`validate_pytorchjob`'s checks are both made from them. As in the anchor's webhook, which runs
before any defaulting, Master.replicas must be given explicitly and equal 1, and replica-type
keys are case-sensitive at admission.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, ClassVar

from pydantic import ConfigDict, Field

from jobcontroller import override
from jobcontroller.api import (
    INT32_MAX,
    MANAGED_BY_VALUES,
    MAX_PROCESSES_PER_POD,
    MAX_REPLICAS,
    JobModel,
    JobSpec,
    KnownTypes,
    KubeModel,
    ReplicaRules,
    Replicas,
    ReplicaSpec,
    RequiredWith,
    RestartPolicy,
    ScaleSubresource,
    build_crd,
    default_job,
    job_errors,
)

__all__ = [
    "MANAGED_BY_VALUES",
    "PYTORCH_CONTAINER_NAME",
    "PYTORCH_PORT",
    "PYTORCH_PORT_NAME",
    "ElasticPolicy",
    "PyTorchJob",
    "PyTorchJobSpec",
    "PyTorchReplicaType",
    "RDZVConf",
    "default_pytorchjob",
    "deprecation_warnings",
    "pytorchjob_crd",
    "validate_pytorchjob",
]

PYTORCH_CONTAINER_NAME = "pytorch"
PYTORCH_PORT_NAME = "pytorchjob-port"
PYTORCH_PORT = 23456


class PyTorchReplicaType(StrEnum):
    MASTER = "Master"
    WORKER = "Worker"


_MSG_NPROC = (
    "elasticPolicy.nProcPerNode (deprecated) and nprocPerNode must not both be set; "
    "use nprocPerNode"
)
_MSG_MIN_MAX = "elasticPolicy.minReplicas must not exceed elasticPolicy.maxReplicas"
_MSG_NPROC_MAX = f"must be at most {MAX_PROCESSES_PER_POD} processes per pod"
#: Longer than any value the pattern and the ceiling allow; bounds the CEL rule's cost.
_NPROC_MAX_LENGTH = 16


class RDZVBackend(StrEnum):
    """torchrun's rendezvous backends, as the anchor names them."""

    C10D = "c10d"
    ETCD = "etcd"
    ETCD_V2 = "etcd-v2"


#: What torchrun's --nproc-per-node accepts.
NPROC_PER_NODE_PATTERN = r"^(auto|cpu|gpu|xpu|[1-9][0-9]*)$"


class RDZVConf(KubeModel):
    """One rendezvous option, passed to torchrun as --rdzv-conf key=value."""

    key: str | None = Field(default=None, description="The option's name.")
    value: str | None = Field(default=None, description="The option's value.")


class ElasticPolicy(KubeModel):
    """torchrun elastic settings; present means the job is elastic."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": (
                        "!has(self.minReplicas) || !has(self.maxReplicas) || "
                        "self.minReplicas <= self.maxReplicas"
                    ),
                    "message": _MSG_MIN_MAX,
                }
            ]
        }
    )

    # Read up to int32 (jobs stored before the ceiling still parse; validation fails them),
    # admitted up to the ceiling (the CRD's maximum).
    min_replicas: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description=(
            f"Fewest workers (nodes); defaults to maxReplicas or Worker replicas. "
            f"At most {MAX_REPLICAS}."
        ),
        json_schema_extra={"maximum": MAX_REPLICAS},
    )
    max_replicas: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description=(
            f"Most workers (nodes); defaults to minReplicas or Worker replicas. "
            f"At most {MAX_REPLICAS}."
        ),
        json_schema_extra={"maximum": MAX_REPLICAS},
    )
    rdzv_backend: RDZVBackend | None = Field(
        default=None, description="torchrun's rendezvous backend: c10d, etcd or etcd-v2."
    )
    rdzv_port: int | None = Field(
        default=None, ge=1, le=65535, description="Port of the rendezvous endpoint."
    )
    rdzv_host: str | None = Field(
        default=None, description="Host of the rendezvous endpoint; defaults to the master's."
    )
    rdzv_id: str | None = Field(default=None, description="The rendezvous (run) id.")
    rdzv_conf: list[RDZVConf] | None = Field(
        default=None, description="Extra rendezvous options (torchrun --rdzv-conf)."
    )
    standalone: bool | None = Field(
        default=None,
        description="Start a local c10d rendezvous with torchrun --standalone; ignores rdzv*.",
    )
    n_proc_per_node: int | None = Field(
        default=None,
        ge=1,
        le=INT32_MAX,
        description=f"Deprecated: use spec.nprocPerNode. At most {MAX_PROCESSES_PER_POD}.",
        json_schema_extra={"maximum": MAX_PROCESSES_PER_POD},
    )
    max_restarts: int | None = Field(
        default=None,
        ge=0,
        le=INT32_MAX,
        description="Worker group restarts torchrun allows before failing (--max-restarts).",
    )
    metrics: list[dict[str, Any]] | None = Field(
        default=None, description="autoscaling/v2 MetricSpecs; when set, an HPA is created."
    )


class PyTorchJobSpec(JobSpec):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": (
                        "!has(self.elasticPolicy) || !has(self.elasticPolicy.nProcPerNode) "
                        "|| !has(self.nprocPerNode)"
                    ),
                    "message": _MSG_NPROC,
                },
            ]
        }
    )

    elastic_policy: ElasticPolicy | None = None
    pytorch_replica_specs: dict[str, ReplicaSpec] = Field(
        description="Replica specs keyed by type: Master (exactly 1 replica) and Worker."
    )
    nproc_per_node: str | None = Field(
        default=None,
        pattern=NPROC_PER_NODE_PATTERN,
        description=(
            "Processes per pod: 'auto', 'cpu', 'gpu', 'xpu' or a positive integer up to "
            f"{MAX_PROCESSES_PER_POD}, as torchrun takes them. Defaults to 'auto'."
        ),
        json_schema_extra={
            "maxLength": _NPROC_MAX_LENGTH,
            "x-kubernetes-validations": [
                {
                    "rule": (
                        "!self.matches('^[0-9]+$') || "
                        f"(size(self) <= {len(str(MAX_PROCESSES_PER_POD))} "
                        f"&& int(self) <= {MAX_PROCESSES_PER_POD})"
                    ),
                    "messageExpression": (f"'{_MSG_NPROC_MAX}, got ' + self"),
                    "message": _MSG_NPROC_MAX,
                }
            ],
        },
    )

    @override
    def replica_specs(self) -> dict[str, ReplicaSpec]:
        return self.pytorch_replica_specs


PYTORCH_SCALE = ScaleSubresource(
    spec_replicas_path=".spec.pytorchReplicaSpecs.Worker.replicas",
    status_replicas_path=".status.replicaStatuses.Worker.active",
    label_selector_path=".status.replicaStatuses.Worker.selector",
)


class PyTorchJob(JobModel[PyTorchJobSpec]):
    """PyTorchJob is a distributed PyTorch training job: a master and workers (or elastic
    workers under torchrun), with MASTER_ADDR, RANK, WORLD_SIZE and PET_* set."""

    VERSION: ClassVar[str] = "v1"
    KIND: ClassVar[str] = "PyTorchJob"
    PLURAL: ClassVar[str] = "pytorchjobs"
    SINGULAR: ClassVar[str] = "pytorchjob"
    REPLICA_TYPES: ClassVar[tuple[str, ...]] = tuple(PyTorchReplicaType)
    DEFAULT_CONTAINER_NAME: ClassVar[str | None] = PYTORCH_CONTAINER_NAME
    SCALE: ClassVar[ScaleSubresource | None] = PYTORCH_SCALE
    # As the anchor's webhook, which runs before any defaulting: types as spelt, and the
    # Master's replicas given and 1. An empty map passes admission and fails validation.
    REPLICA_RULES: ClassVar[ReplicaRules | None] = ReplicaRules(
        exact=True,
        empty="{path}: must be specified",
        rules=(
            KnownTypes(message="replica types must be Master or Worker"),
            Replicas(
                types=("Master",),
                min=1,
                max=1,
                must_set=True,
                message="Master replicas must be set to 1",
            ),
            Replicas(types=("Worker",), min=1, message="Worker replicas must be at least 1"),
            # elasticPolicy scales the Workers (torchrun's nodes).
            RequiredWith(
                rtype="Worker",
                field="elasticPolicy",
                message="elasticPolicy requires a Worker replica spec",
            ),
        ),
    )


def default_pytorchjob(job: PyTorchJob) -> PyTorchJob:
    """The anchor's SetDefaults_PyTorchJob, as a pure function returning a new object."""
    job = default_job(
        job,
        restart_policy=RestartPolicy.ON_FAILURE,
        port_name=PYTORCH_PORT_NAME,
        port=PYTORCH_PORT,
    )
    spec = job.spec
    elastic = spec.elastic_policy
    if elastic is not None:
        if elastic.min_replicas is None and elastic.max_replicas is not None:
            elastic.min_replicas = elastic.max_replicas
        elif elastic.max_replicas is None and elastic.min_replicas is not None:
            elastic.max_replicas = elastic.min_replicas
        elif elastic.min_replicas is None and elastic.max_replicas is None:
            worker = spec.pytorch_replica_specs.get(PyTorchReplicaType.WORKER)
            # Without a Worker spec (invalid anyway) the anchor would dereference nil.
            if worker is not None:
                elastic.min_replicas = worker.replicas
                elastic.max_replicas = worker.replicas
    if spec.nproc_per_node is None and (elastic is None or elastic.n_proc_per_node is None):
        spec.nproc_per_node = "auto"
    return job


def validate_pytorchjob(job: PyTorchJob, *, old: PyTorchJob | None = None) -> list[str]:
    """The anchor webhook's checks (plus the pod-name length check); [] when valid.

    Unlike the anchor (whose update path compares the new object with itself), managedBy
    immutability is enforced on update.
    """
    errors = job_errors(job, old=old, containers_of_unknown_types=False)
    spec = job.spec
    elastic = spec.elastic_policy
    if elastic is not None:
        if elastic.n_proc_per_node is not None and spec.nproc_per_node is not None:
            errors.append(f"spec.elasticPolicy.nProcPerNode: {_MSG_NPROC}")
        if (
            elastic.min_replicas is not None
            and elastic.max_replicas is not None
            and elastic.min_replicas > elastic.max_replicas
        ):
            errors.append(f"spec.elasticPolicy: {_MSG_MIN_MAX}")
    return errors + _ceiling_errors(job)


def _ceiling_errors(job: PyTorchJob) -> list[str]:
    """The ceilings admission enforces (the CRD's maximums), for jobs stored before them."""
    errors: list[str] = []
    spec, elastic = job.spec, job.spec.elastic_policy
    nproc = spec.nproc_per_node
    if nproc is not None and nproc.isdigit() and int(nproc) > MAX_PROCESSES_PER_POD:
        errors.append(f"spec.nprocPerNode: {_MSG_NPROC_MAX}, got {nproc}")
    if elastic is None:
        return errors
    for field, value, ceiling in (
        ("minReplicas", elastic.min_replicas, MAX_REPLICAS),
        ("maxReplicas", elastic.max_replicas, MAX_REPLICAS),
        ("nProcPerNode", elastic.n_proc_per_node, MAX_PROCESSES_PER_POD),
    ):
        if value is not None and value > ceiling:
            errors.append(f"spec.elasticPolicy.{field}: must be at most {ceiling}, got {value}")
    return errors


def deprecation_warnings(job: PyTorchJob) -> list[str]:
    """Warnings the anchor's webhook returns alongside an accepted object."""
    elastic = job.spec.elastic_policy
    if elastic is not None and elastic.n_proc_per_node is not None:
        return ["spec.elasticPolicy.nProcPerNode is deprecated; use spec.nprocPerNode"]
    return []


def pytorchjob_crd() -> dict[str, Any]:
    return build_crd(PyTorchJob)
