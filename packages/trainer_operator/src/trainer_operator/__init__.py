"""trainer_operator: Kubeflow Trainer v2's API, ``trainer.kubeflow.org/v1alpha1``.

TrainJob (api.py), TrainingRuntime and ClusterTrainingRuntime (runtime.py), the JobSet
``jobset.x-k8s.io/v1alpha2`` types a runtime's template holds and the controller creates
(jobset.py), and their CRDs (crd.py). The TrainJob controller is to come, as controller.py on the
base library's JobController, like the v1 frameworks'.
"""

from trainer_operator.api import (
    ANCESTOR_LABEL,
    MANAGED_BY_SELF,
    RuntimeRef,
    Trainer,
    TrainJob,
    TrainJobConditionReason,
    TrainJobConditionType,
    TrainJobSpec,
    TrainJobStatus,
)
from trainer_operator.crd import crds
from trainer_operator.jobset import JobSet, JobSetSpec, ReplicatedJob
from trainer_operator.runtime import (
    ClusterTrainingRuntime,
    MLPolicy,
    TrainingRuntime,
    TrainingRuntimeSpec,
)

__all__ = [
    "ANCESTOR_LABEL",
    "MANAGED_BY_SELF",
    "ClusterTrainingRuntime",
    "JobSet",
    "JobSetSpec",
    "MLPolicy",
    "ReplicatedJob",
    "RuntimeRef",
    "TrainJob",
    "TrainJobConditionReason",
    "TrainJobConditionType",
    "TrainJobSpec",
    "TrainJobStatus",
    "Trainer",
    "TrainingRuntime",
    "TrainingRuntimeSpec",
    "crds",
]
