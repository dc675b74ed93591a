"""Write the Grafana dashboard of the operators, manifests/monitoring/dashboard.json.

uv run python hack/gen-dashboard.py           # regenerate
uv run python hack/gen-dashboard.py --check   # exit 1 if the committed dashboard has drifted

Panels are listed here as (title, unit, [(legend, PromQL)]) so the JSON stays consistent and a
test can check that every expression names a metric the operators export.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parent.parent / "manifests" / "monitoring" / "dashboard.json"

Target = tuple[str, str]
Panel = tuple[str, str, list[Target]]


def _q(quantile: float, metric: str, by: str, window: str = "5m") -> str:
    return f"histogram_quantile({quantile}, sum by (le, {by}) (rate({metric}_bucket[{window}])))"


ROWS: list[tuple[str, list[Panel]]] = [
    (
        "Jobs",
        [
            (
                "Jobs by state",
                "short",
                [("{{framework}} {{state}}", "sum by (framework, state) (jobcontroller_jobs)")],
            ),
            (
                "Jobs created, succeeded, failed, restarted (per minute)",
                "short",
                [
                    (
                        f"{{{{framework}}}} {what}",
                        f"sum by (framework) (rate(training_operator_jobs_{what}_total[5m])) * 60",
                    )
                    for what in ("created", "successful", "failed", "restarted")
                ],
            ),
            (
                "Job duration, start to end (p50, p90)",
                "s",
                [
                    (
                        f"p{int(q * 100)} {{{{framework}}}} {{{{state}}}}",
                        _q(q, "jobcontroller_job_duration_seconds", "framework, state", "1h"),
                    )
                    for q in (0.5, 0.9)
                ],
            ),
            (
                "What users wait for (p90): to the first pod, to Running",
                "s",
                [
                    (
                        "first pod {{framework}}",
                        _q(0.9, "jobcontroller_job_first_pod_seconds", "framework", "1h"),
                    ),
                    (
                        "Running {{framework}}",
                        _q(0.9, "jobcontroller_job_queue_wait_seconds", "framework", "1h"),
                    ),
                ],
            ),
            (
                "Longest in state (jobs stuck Created alert at 30 min)",
                "s",
                [
                    (
                        "{{framework}} {{state}}",
                        "max by (framework, state) "
                        '(jobcontroller_job_state_oldest_seconds{state=~"Created|Restarting|Pending"})',
                    )
                ],
            ),
            (
                "Pods and services created, pods failed (per minute)",
                "short",
                [
                    ("pods created", "sum(rate(created_pods_total[5m])) * 60"),
                    ("pods deleted", "sum(rate(deleted_pods_total[5m])) * 60"),
                    ("pods failed", "sum(rate(failed_pods_total[5m])) * 60"),
                    ("services created", "sum(rate(succeeded_service_creation_total[5m])) * 60"),
                    (
                        "service creations failed",
                        "sum(rate(failed_service_creation_total[5m])) * 60",
                    ),
                ],
            ),
        ],
    ),
    (
        "Reconciles",
        [
            (
                "Reconciles by result (per second)",
                "ops",
                [
                    (
                        "{{controller}} {{result}}",
                        "sum by (controller, result) "
                        "(rate(controller_runtime_reconcile_total[5m]))",
                    )
                ],
            ),
            (
                "Reconcile errors (per second)",
                "ops",
                [
                    (
                        "{{controller}} errors",
                        "sum by (controller) (rate(controller_runtime_reconcile_errors_total[5m]))",
                    ),
                    (
                        "{{controller}} unexpected",
                        "sum by (controller) (rate(controller_runtime_reconcile_panics_total[5m]))",
                    ),
                ],
            ),
            (
                "Reconcile latency (p50, p99)",
                "s",
                [
                    (
                        f"p{int(q * 100)} {{{{controller}}}}",
                        _q(q, "controller_runtime_reconcile_time_seconds", "controller"),
                    )
                    for q in (0.5, 0.99)
                ],
            ),
            (
                "Workers busy / allowed",
                "short",
                [
                    (
                        "{{controller}} busy",
                        "sum by (controller) (controller_runtime_active_workers)",
                    ),
                    (
                        "{{controller}} allowed",
                        "max by (controller) (controller_runtime_max_concurrent_reconciles)",
                    ),
                ],
            ),
        ],
    ),
    (
        "Work queue",
        [
            ("Depth", "short", [("{{name}}", "sum by (name) (workqueue_depth)")]),
            (
                "Longest-running processor",
                "s",
                [("{{name}}", "max by (name) (workqueue_longest_running_processor_seconds)")],
            ),
            (
                "Time in queue (p99)",
                "s",
                [("{{name}}", _q(0.99, "workqueue_queue_duration_seconds", "name"))],
            ),
            (
                "Retries (per second)",
                "ops",
                [("{{name}}", "sum by (name) (rate(workqueue_retries_total[5m]))")],
            ),
        ],
    ),
    (
        "TrainJob progress",
        [
            (
                "TrainJob progress (status.trainerStatus, unfinished TrainJobs)",
                "percent",
                [
                    (
                        "{{namespace}}/{{trainjob}}",
                        "max by (namespace, trainjob) (trainjob_progress_percentage)",
                    )
                ],
            ),
            (
                "Progress reports by code, and status writes (per second)",
                "ops",
                [
                    ("{{code}}", "sum by (code) (rate(trainjob_status_reports_total[5m]))"),
                    ("status writes", "sum(rate(trainjob_status_writes_total[5m]))"),
                    ("coalesced", "sum(rate(trainjob_status_coalesced_reports_total[5m]))"),
                ],
            ),
        ],
    ),
    (
        "API server",
        [
            (
                "Requests by code (per second)",
                "reqps",
                [("{{code}}", "sum by (code) (rate(rest_client_requests_total[5m]))")],
            ),
            (
                "Requests by verb and resource (per second)",
                "reqps",
                [
                    (
                        "{{verb}} {{resource}}",
                        "sum by (verb, resource) (rate(jobcontroller_api_requests_total[5m]))",
                    )
                ],
            ),
            (
                "Request latency (p99)",
                "s",
                [
                    (
                        "{{verb}} {{resource}}",
                        _q(0.99, "jobcontroller_api_request_duration_seconds", "verb, resource"),
                    )
                ],
            ),
            (
                "Client rate-limiter wait (p99)",
                "s",
                [("wait", _q(0.99, "jobcontroller_api_rate_limiter_wait_seconds", "instance"))],
            ),
        ],
    ),
    (
        "Watches, leadership, process",
        [
            (
                "Watch restarts (per minute)",
                "short",
                [
                    (
                        "{{resource}} {{reason}}",
                        "sum by (resource, reason) (rate(informer_watch_restarts_total[5m])) * 60",
                    )
                ],
            ),
            (
                "Relists (per minute)",
                "short",
                [("{{resource}}", "sum by (resource) (rate(informer_relists_total[5m])) * 60")],
            ),
            (
                "Objects cached",
                "short",
                [("{{resource}}", "max by (resource) (informer_store_objects)")],
            ),
            (
                "Leader",
                "short",
                [
                    (
                        "{{name}} {{instance}}",
                        "max by (name, instance) (leader_election_master_status)",
                    )
                ],
            ),
            ("Resident memory", "bytes", [("{{instance}}", "process_resident_memory_bytes")]),
            ("CPU (cores)", "short", [("{{instance}}", "rate(process_cpu_seconds_total[5m])")]),
        ],
    ),
]


def dashboard() -> dict[str, Any]:
    panels: list[dict[str, Any]] = []
    next_id, y = 1, 0
    for row_title, row in ROWS:
        panels.append(
            {
                "id": next_id,
                "type": "row",
                "title": row_title,
                "collapsed": False,
                "gridPos": {"h": 1, "w": 24, "x": 0, "y": y},
                "panels": [],
            }
        )
        next_id, y = next_id + 1, y + 1
        for i, (title, unit, targets) in enumerate(row):
            panels.append(
                {
                    "id": next_id,
                    "type": "timeseries",
                    "title": title,
                    "datasource": {"type": "prometheus", "uid": "${datasource}"},
                    "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
                    "options": {"legend": {"displayMode": "list", "placement": "bottom"}},
                    "gridPos": {"h": 8, "w": 8, "x": (i % 3) * 8, "y": y + (i // 3) * 8},
                    "targets": [
                        {"refId": chr(ord("A") + j), "expr": expr, "legendFormat": legend}
                        for j, (legend, expr) in enumerate(targets)
                    ],
                }
            )
            next_id += 1
        y += ((len(row) + 2) // 3) * 8
    return {
        "title": "Kubeflow training operators (Python)",
        "uid": "kubeflow-operators-py",
        "tags": ["kubeflow", "training-operator"],
        "timezone": "utc",
        "schemaVersion": 39,
        "version": 1,
        "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {
            "list": [
                {
                    "name": "datasource",
                    "type": "datasource",
                    "query": "prometheus",
                    "label": "Data source",
                }
            ]
        },
        "panels": panels,
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    text = render()
    current = OUT.read_text() if OUT.exists() else ""
    if current == text:
        return 0
    if args.check:
        print(f"{OUT} is out of date: run `uv run python hack/gen-dashboard.py`")
        return 1
    OUT.write_text(text)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
