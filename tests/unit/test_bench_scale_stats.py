"""The arithmetic behind ``make bench BENCH=scale-50k``'s latencies and per-object RSS."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import scale_stats as st  # bench/ is not a package: on sys.path above


def _job(created: str, *conds: tuple[str, str, str]) -> dict[str, object]:
    return {
        "metadata": {"creationTimestamp": created},
        "status": {
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": when} for t, s, when in conds
            ]
        },
    }


def test_percentile_is_nearest_rank() -> None:
    xs = [float(i) for i in range(1, 101)]  # 1..100
    assert st.percentile(xs, 50) == 50.0
    assert st.percentile(xs, 99) == 99.0
    assert st.percentile(xs, 100) == 100.0
    # Unsorted input, and a p99 of few values is their maximum, not an interpolation.
    assert st.percentile([3.0, 1.0, 2.0], 99) == 3.0
    assert st.percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert st.percentile([], 50) is None


def test_percentile_rejects_a_rank_outside_0_100() -> None:
    with pytest.raises(ValueError, match="percentile"):
        st.percentile([1.0], 0)
    with pytest.raises(ValueError, match="percentile"):
        st.percentile([1.0], 101)


def test_latency_runs_from_creation_to_the_running_condition() -> None:
    jobs = [
        _job(
            "2026-11-26T10:00:00Z",
            ("Created", "True", "2026-11-26T10:00:00Z"),
            ("Running", "True", "2026-11-26T10:00:07Z"),
        ),
        _job("2026-11-26T10:00:01Z", ("Running", "True", "2026-11-26T10:01:01Z")),
        # Created only, and Running but False: neither counts as Running.
        _job("2026-11-26T10:00:02Z", ("Created", "True", "2026-11-26T10:00:02Z")),
        _job("2026-11-26T10:00:03Z", ("Running", "False", "2026-11-26T10:00:09Z")),
        {"metadata": {"creationTimestamp": "2026-11-26T10:00:04Z"}},
    ]
    latencies, missing = st.running_latencies(jobs)
    assert latencies == [7.0, 60.0]
    assert missing == 3


def test_per_object_figure_and_projection() -> None:
    # 100 MB above a 60 MB idle process over 51,200 objects is 2 KB each.
    assert st.per_object_kb(rss_mb=160, idle_mb=60, objects=51_200) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="positive"):
        st.per_object_kb(rss_mb=160, idle_mb=60, objects=0)
    # 150,000 pods of 5-pod jobs with a Service each: 30,000 jobs + 150,000 + 150,000.
    objects = st.cached_objects(pods=150_000, pods_per_job=5, services_per_pod=1)
    assert objects == 330_000
    assert st.projected_mb(idle_mb=60, kb_per_object=2, objects=objects) == pytest.approx(
        60 + 660_000 / 1024
    )
