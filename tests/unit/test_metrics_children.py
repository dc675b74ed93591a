"""Metrics.child: the labelled children of the hot paths looked up once, counting as labels()."""

from __future__ import annotations

from jobcontroller.runtime.metrics import Metrics


def test_a_child_counts_in_the_family_under_its_own_label_set() -> None:
    m = Metrics(process_collectors=False)
    for _ in range(3):
        m.child(m.api_requests, "GET", "pods", "200").inc()
    m.child(m.api_requests, "GET", "pods", "404").inc()
    m.api_requests.labels("GET", "pods", "200").inc()  # the uncached path sees the same child
    m.child(m.api_request_duration, "GET", "pods").observe(0.02)

    def sample(name: str, **labels: str) -> float | None:
        return m.registry.get_sample_value(name, labels)

    assert sample("jobcontroller_api_requests_total", verb="GET", resource="pods", code="200") == 4
    assert sample("jobcontroller_api_requests_total", verb="GET", resource="pods", code="404") == 1
    assert sample("jobcontroller_api_request_duration_seconds_count", verb="GET", resource="pods")
    assert m.child(m.api_requests, "GET", "pods", "200") is m.api_requests.labels(
        "GET", "pods", "200"
    )


def test_two_processes_metrics_keep_their_children_apart() -> None:
    a, b = Metrics(process_collectors=False), Metrics(process_collectors=False)
    a.child(a.reconcile_total, "tfjob-controller", "success").inc()
    labels = {"controller": "tfjob-controller", "result": "success"}
    assert a.registry.get_sample_value("controller_runtime_reconcile_total", labels) == 1
    assert b.registry.get_sample_value("controller_runtime_reconcile_total", labels) is None
