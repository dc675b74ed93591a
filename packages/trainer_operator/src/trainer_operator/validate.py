"""The checks of v2.3.0's TrainJob webhook that need the runtime (its jobset, torch, mpi and
xgboost plugins' ``Validate``), made by the controller when it reads the runtime: there is no
webhook here, and the CRD's CEL rules cannot see another object. A TrainJob that fails one gets no
JobSet (nor snapshot, so a runtime fixed meanwhile is read afresh), and the reasons in a
Warning event.

The details are upstream's words; each is prefixed by its field path, as the API server words
a CEL rule's refusal (``spec.runtimeRef: Invalid value: ...``: no echo of the value).
v2.3.0 checks the runtime patches' replicated jobs and containers against the template with
the patches already merged in, so those checks never refuse anything; they are not repeated.
"""

from __future__ import annotations

from typing import Any

from trainer_operator.info import DATASET_INITIALIZER, MODEL_INITIALIZER, Info
from trainer_operator.mpi import mpi_errors

__all__ = ["trainjob_errors"]

Obj = dict[str, Any]

VOLUME_INITIALIZER = "initializer"
TORCH_RESERVED = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)
XGBOOST_RESERVED = ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER")


def _containers(info: Info) -> dict[str, dict[str, Obj]]:
    """Replicated job -> its containers and init containers by name."""
    out: dict[str, dict[str, Obj]] = {}
    for rjob in info.spec.get("replicatedJobs") or ():
        pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get(
            "spec"
        ) or {}
        named = {str(c.get("name")): c for c in pod.get("initContainers") or ()}
        named.update({str(c.get("name")): c for c in pod.get("containers") or ()})
        out[str(rjob.get("name"))] = named
    return out


def _initializer_errors(info: Info, trainjob: Obj) -> list[str]:
    initializer = (trainjob.get("spec") or {}).get("initializer") or {}
    containers = _containers(info)
    errors: list[str] = []
    for field, step, config in (
        ("dataset", DATASET_INITIALIZER, "datasetConfig"),
        ("model", MODEL_INITIALIZER, "modelConfig"),
    ):
        if initializer.get(field) is None:
            continue
        job = containers.get(step)
        if job is None:
            detail = f"must have {step} job when trainJob is configured with input {config}"
        elif step not in job:
            detail = f"must have container with name - {step} in the {step} job"
        elif not any(
            m.get("name") == VOLUME_INITIALIZER for m in job[step].get("volumeMounts") or ()
        ):
            detail = (
                f"must have volumeMount with name - {VOLUME_INITIALIZER} in container {step} "
                f"of the {step} job"
            )
        else:
            continue
        errors.append(f"spec.runtimeRef: Invalid value: {detail}")
    return errors


def _env_names(trainjob: Obj) -> list[str]:
    trainer = (trainjob.get("spec") or {}).get("trainer") or {}
    return [str(e.get("name")) for e in trainer.get("env") or ()]


def trainjob_errors(info: Info, trainjob: Obj) -> list[str]:
    """What v2.3.0's webhook would have refused ``trainjob`` for, on this runtime."""
    errors = _initializer_errors(info, trainjob)
    policy = info.ml_policy or {}
    names = _env_names(trainjob)
    if policy.get("torch") is not None:
        reserved = sorted({n for n in names if n in TORCH_RESERVED})
        if reserved:
            errors.append(
                "spec.trainer.env: Invalid value: must not have reserved envs, invalid envs "
                f"configured: [{' '.join(reserved)}]"
            )
    if policy.get("xgboost") is not None:
        errors += [
            f"spec.trainer.env[{i}]: Forbidden: {name} is reserved for the XGBoost runtime"
            for i, name in enumerate(names)
            if name in XGBOOST_RESERVED
        ]
    return errors + mpi_errors(info, trainjob)
