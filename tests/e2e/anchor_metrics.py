"""The metric names and label sets of the anchors' /metrics, taken from their sources, for the
compatibility check in test_operators_as_deployed.

training-operator v1.9 (kubeflow/trainer v1.9.0-v1.9.4, pkg/common/metrics.go and
pkg/controller.v1/common/{pod,service,job_controller}.go; controller-runtime v0.19.1's
pkg/internal/controller/metrics/metrics.go, pkg/metrics/workqueue.go, client_go_adapter.go and
leaderelection.go). v1.9.4's controller-runtime v0.24.1 adds a `priority` label to
workqueue_depth; we keep v0.19.1's set. The pod, pod-group and service counters are defined,
label-less, by v1.9 (which registers them where nothing serves them); we serve them.

mpi-operator v0.8.0 (pkg/controller/mpi_job_controller.go, cmd/mpi-operator/app/server.go).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

_JOB = ("job_namespace", "framework")
_CONTROLLER = ("controller",)
_QUEUE = ("name", "controller")

TRAINING_OPERATOR: dict[str, tuple[str, ...]] = {
    "training_operator_jobs_created_total": _JOB,
    "training_operator_jobs_deleted_total": _JOB,
    "training_operator_jobs_successful_total": _JOB,
    "training_operator_jobs_failed_total": _JOB,
    "training_operator_jobs_restarted_total": _JOB,
    "created_pods_total": (),
    "deleted_pods_total": (),
    "failed_pods_total": (),
    "created_pod_groups_total": (),
    "deleted_pod_groups_total": (),
    "succeeded_service_creation_total": (),
    "failed_service_creation_total": (),
    "controller_runtime_reconcile_total": ("controller", "result"),
    "controller_runtime_reconcile_errors_total": _CONTROLLER,
    "controller_runtime_terminal_reconcile_errors_total": _CONTROLLER,
    "controller_runtime_reconcile_panics_total": _CONTROLLER,
    "controller_runtime_reconcile_time_seconds": _CONTROLLER,
    "controller_runtime_max_concurrent_reconciles": _CONTROLLER,
    "controller_runtime_active_workers": _CONTROLLER,
    "workqueue_depth": _QUEUE,
    "workqueue_adds_total": _QUEUE,
    "workqueue_queue_duration_seconds": _QUEUE,
    "workqueue_work_duration_seconds": _QUEUE,
    "workqueue_unfinished_work_seconds": _QUEUE,
    "workqueue_longest_running_processor_seconds": _QUEUE,
    "workqueue_retries_total": _QUEUE,
    "rest_client_requests_total": ("code", "method", "host"),
    "leader_election_master_status": ("name",),
    # The standard process collector (controller-runtime registers it too).
    "process_resident_memory_bytes": (),
    "process_cpu_seconds_total": (),
    "process_open_fds": (),
    "process_start_time_seconds": (),
}

MPI_OPERATOR: dict[str, tuple[str, ...]] = {
    "mpi_operator_jobs_created_total": (),
    "mpi_operator_jobs_successful_total": (),
    "mpi_operator_jobs_failed_total": (),
    "mpi_operator_job_info": ("launcher", "namespace"),
    "mpi_operator_is_leader": (),
}

#: The series a finished job must have produced, with these label values.
AFTER_A_JOB = ("training_operator_jobs_created_total", "training_operator_jobs_successful_total")


def mismatches(text: str, expected: dict[str, tuple[str, ...]]) -> list[str]:
    """Every expected family that is missing or has a sample with other label names."""
    families = {f.name: f for f in text_string_to_metric_families(text)}
    problems = []
    for name, labels in expected.items():
        family = families.get(name) or families.get(name.removesuffix("_total"))
        if family is None:
            problems.append(f"{name}: missing")
            continue
        for sample in family.samples:
            got = tuple(sorted(set(sample.labels) - {"le", "quantile"}))
            if got != tuple(sorted(labels)):
                problems.append(f"{sample.name}: labels {got}, anchor has {tuple(sorted(labels))}")
                break
    return problems


def has_sample(text: str, name: str, **labels: str) -> bool:
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value > 0
    return False


MONITORING = Path(__file__).resolve().parents[2] / "manifests" / "monitoring"
_METRIC = re.compile(
    r"\b(?:training_operator|jobcontroller|controller_runtime|workqueue|rest_client|informer"
    r"|leader_election|process|mpi_operator|created|deleted|failed|succeeded)_[a-z_]+\b"
)


def monitoring_metrics() -> set[str]:
    """The metric families the dashboard's and the alerts' expressions name."""
    dashboard = json.loads((MONITORING / "dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    rules = yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())
    exprs += [r["expr"] for g in rules["spec"]["groups"] for r in g["rules"]]
    assert len(exprs) > 40, len(exprs)
    names = {m for e in exprs for m in _METRIC.findall(e)}
    return {re.sub(r"_(bucket|sum|count)$", "", n) for n in names}


def families(text: str) -> set[str]:
    """Family names in an exposition, counters with their _total as queries spell them."""
    out = set()
    for family in text_string_to_metric_families(text):
        out.add(family.name + "_total" if family.type == "counter" else family.name)
    return out
