"""TrainingRuntime and ClusterTrainingRuntime, ``trainer.kubeflow.org/v1alpha1`` (Trainer v2.3.0).

A runtime is what a platform team writes once and data scientists' TrainJobs point at: the
framework policy (``mlPolicy``), gang scheduling (``podGroupPolicy``) and the JobSet the
controller creates for each TrainJob (``template``). The two kinds share one spec; a
TrainingRuntime serves TrainJobs in its own namespace, a ClusterTrainingRuntime those of every
namespace.

Admission of a runtime, as v2.3.0's webhooks judged it, is in the CRD (crd.py): a replicated
job labelled as a trainer or initializer step runs one Job and has its step's container.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import ConfigDict, Field

from jobcontroller.api import KubeModel
from trainer_operator.jobset import JobSetSpec
from trainer_operator.kubetypes import EmbeddedMeta
from trainer_operator.meta import (
    CRD_DEFAULT,
    SET,
    Int32,
    TrainerObject,
    cel,
    extra,
    list_map,
    one_of,
)

__all__ = [
    "ClusterTrainingRuntime",
    "CoschedulingPodGroupPolicySource",
    "EnvInjection",
    "EnvInjectionTarget",
    "FluxMLPolicySource",
    "JAXMLPolicySource",
    "JobSetTemplateSpec",
    "MLPolicy",
    "MPIMLPolicySource",
    "NetworkTopologySpec",
    "PodGroupPolicy",
    "TorchMLPolicySource",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "VolcanoPodGroupPolicySource",
    "XGBoostMLPolicySource",
]


class EnvInjectionTarget(KubeModel):
    """Containers of one replicated job that get the torch env too."""

    job_name: str = Field(
        min_length=1, max_length=253, description="The replicated job (node, for instance)."
    )
    container_names: list[Annotated[str, Field(max_length=63)]] = Field(
        min_length=1,
        max_length=8,
        description=(
            "Its containers that get the PET_* variables, besides node (which always does and "
            "may not be named here)."
        ),
        json_schema_extra=extra(
            SET,
            rules=[
                cel(
                    "!self.exists(c, c == 'node')",
                    message=(
                        "containerNames must not include the main node container because PET_* "
                        "envs are always injected into it"
                    ),
                )
            ],
        ),
    )


class EnvInjection(KubeModel):
    targets: list[EnvInjectionTarget] | None = Field(
        default=None,
        max_length=16,
        description="Replicated jobs, by name, with the extra containers that get the env.",
        json_schema_extra=list_map("jobName"),
    )


class TorchMLPolicySource(KubeModel):
    """PyTorch: torchrun's PET_* env (nodes, processes per node, rank, master address)."""

    env_injection: EnvInjection | None = Field(
        default=None,
        description=(
            "Other containers that get the PET_* variables than the trainer's node container "
            "(sidecars, init containers). None by default."
        ),
    )


class JAXMLPolicySource(KubeModel):
    """JAX: the env ``jax.distributed.initialize`` reads. No settings."""


class XGBoostMLPolicySource(KubeModel):
    """XGBoost: the DMLC_* tracker env; one worker per GPU of a node, else one per node."""


class MPIMLPolicySource(KubeModel):
    """MPI: a launcher Job running mpirun over SSH to the nodes listed in a hostfile."""

    num_proc_per_node: Int32 | None = Field(
        default=None,
        description="Processes (hostfile slots) per node. Defaults to 1.",
        json_schema_extra={CRD_DEFAULT: 1},
    )
    mpi_implementation: str | None = Field(
        default=None,
        description="The MPI whose hostfile format is written: OpenMPI (the default).",
        json_schema_extra=extra(one_of("OpenMPI", ""), {CRD_DEFAULT: "OpenMPI"}),
    )
    ssh_auth_mount_path: str | None = Field(
        default=None,
        max_length=4096,
        description="Where the SSH keys are mounted. Defaults to /root/.ssh.",
        json_schema_extra={CRD_DEFAULT: "/root/.ssh"},
    )
    run_launcher_as_node: bool | None = Field(
        default=None,
        description="Run a training process on the launcher too. Defaults to false.",
        json_schema_extra={CRD_DEFAULT: False},
    )


class FluxMLPolicySource(KubeModel):
    """Flux: an HPC scheduler started across the nodes, the job run under it."""

    num_proc_per_node: Int32 | None = Field(
        default=None,
        description="Processes per node, at least 1. Defaults to 1.",
        json_schema_extra={
            CRD_DEFAULT: 1,
            "x-kubernetes-validations": [
                cel("self >= 1", message="NumProcPerNode in fluxPolicy must be >= 1")
            ],
        },
    )


_POLICIES = ("torch", "mpi", "jax", "xgboost", "flux")


class MLPolicy(KubeModel):
    """The framework settings of a runtime: node count and at most one framework policy.

    Without a framework policy the trainer's pods get no framework env (plain ML).
    """

    model_config = ConfigDict(
        json_schema_extra=extra(
            rules=[
                cel(
                    "[" + ", ".join(f"has(self.{p})" for p in _POLICIES) + "]"
                    ".filter(x, x).size() <= 1",
                    message="Only one of the policy can be configured",
                )
            ]
        )
    )

    num_nodes: Int32 | None = Field(
        default=None,
        description="Training nodes (pods of the trainer step) unless a TrainJob says. Default 1.",
    )
    torch: TorchMLPolicySource | None = Field(default=None, description="PyTorch (torchrun).")
    mpi: MPIMLPolicySource | None = Field(default=None, description="MPI (mpirun).")
    flux: FluxMLPolicySource | None = Field(default=None, description="Flux.")
    jax: JAXMLPolicySource | None = Field(default=None, description="JAX.")
    xgboost: XGBoostMLPolicySource | None = Field(default=None, description="XGBoost.")

    def policy(self) -> str | None:
        """The framework policy set (torch, mpi, flux, jax, xgboost), if any."""
        return next((p for p in _POLICIES if getattr(self, p) is not None), None)


class CoschedulingPodGroupPolicySource(KubeModel):
    """The scheduler-plugins coscheduling PodGroup, its minMember the number of nodes."""

    schedule_timeout_seconds: Int32 | None = Field(
        default=None,
        description="How long the gang may take to be scheduled (0: the plugin's). Default 60.",
        json_schema_extra={CRD_DEFAULT: 60},
    )


class NetworkTopologySpec(KubeModel):
    """Volcano's network-topology constraint for the gang (with its HyperNode CRDs)."""

    mode: str | None = Field(
        default=None,
        description="hard (a constraint, the default) or soft (a preference).",
        json_schema_extra=extra(one_of("hard", "soft"), {CRD_DEFAULT: "hard"}),
    )
    highest_tier_allowed: int | None = Field(
        default=None,
        description="The highest network tier the gang may span. Defaults to 1.",
        json_schema_extra={CRD_DEFAULT: 1},
    )


class VolcanoPodGroupPolicySource(KubeModel):
    """A Volcano PodGroup."""

    network_topology: NetworkTopologySpec | None = Field(
        default=None, description="Keep the gang within a network tier."
    )


class PodGroupPolicy(KubeModel):
    """Gang scheduling of a TrainJob's pods: one of coscheduling or volcano."""

    coscheduling: CoschedulingPodGroupPolicySource | None = Field(
        default=None, description="Through the scheduler-plugins coscheduling plugin."
    )
    volcano: VolcanoPodGroupPolicySource | None = Field(
        default=None, description="Through the Volcano scheduler."
    )


class JobSetTemplateSpec(KubeModel):
    """The JobSet a TrainJob gets (named and namespaced as the TrainJob)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    metadata: EmbeddedMeta | None = Field(
        default=None, description="Labels and annotations for the JobSet."
    )
    spec: JobSetSpec | None = Field(
        default=None,
        description=(
            "The JobSet's spec, before the TrainJob's trainer, initializer and patches are "
            "applied to it."
        ),
    )


class TrainingRuntimeSpec(KubeModel):
    """A runtime: framework policy, gang scheduling and the JobSet template."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    ml_policy: MLPolicy | None = Field(
        default=None, description="Framework settings: node count and the framework's policy."
    )
    pod_group_policy: PodGroupPolicy | None = Field(
        default=None, description="Gang scheduling of the pods, if any."
    )
    template: JobSetTemplateSpec | None = Field(
        default=None,
        description=(
            "The JobSet to run. Its replicated jobs labelled "
            "trainer.kubeflow.org/trainjob-ancestor-step (trainer, dataset-initializer, "
            "model-initializer) are the steps a TrainJob's fields apply to."
        ),
    )


class _Runtime(TrainerObject):
    spec: TrainingRuntimeSpec | None = Field(default=None, description="The runtime.")

    @property
    def runtime_spec(self) -> TrainingRuntimeSpec:
        """The spec, empty when absent."""
        return self.spec or TrainingRuntimeSpec()


class TrainingRuntime(_Runtime):
    """A runtime for the TrainJobs of its own namespace."""

    KIND: ClassVar[str] = "TrainingRuntime"
    PLURAL: ClassVar[str] = "trainingruntimes"
    SINGULAR: ClassVar[str] = "trainingruntime"


class ClusterTrainingRuntime(_Runtime):
    """A runtime for the TrainJobs of every namespace (cluster-scoped)."""

    KIND: ClassVar[str] = "ClusterTrainingRuntime"
    PLURAL: ClassVar[str] = "clustertrainingruntimes"
    SINGULAR: ClassVar[str] = "clustertrainingruntime"
    SCOPE: ClassVar[Literal["Namespaced", "Cluster"]] = "Cluster"
