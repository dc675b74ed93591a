"""What ``kfjob get``/``wait`` print for a TrainJob: the progress bar drawn from
``status.trainerStatus`` (its parts, rounding, the ETA's form, metrics kept to a width), the
state read from its conditions and JobSet counts, and its row beside the v1 kinds'."""

from __future__ import annotations

import datetime as dt
import io
from typing import Any

import pytest
from rich.console import Console

from kfjob.tables import jobs_table, metrics_text, progress_bar, trainjob_progress_line
from kfjob.trainjobs import is_trainjob, trainjob_state
from tf_operator.api import TFJob
from trainer_operator.api import TrainerStatus, TrainJob

NOW = "2026-01-01T00:00:00Z"


def trainer(**fields: Any) -> TrainerStatus:
    return TrainerStatus.model_validate({"lastUpdatedTime": NOW, **fields})


def trainjob(name: str = "llm", **status: Any) -> TrainJob:
    return TrainJob.parse(
        {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "TrainJob",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": NOW},
            "spec": {"runtimeRef": {"name": "torch-distributed"}},
            **({"status": status} if status else {}),
        }
    )


def cond(ctype: str, status: str = "True") -> dict[str, str]:
    return {
        "type": ctype,
        "status": status,
        "reason": "Because",
        "message": "",
        "lastTransitionTime": NOW,
    }


def render(table: Any) -> list[str]:
    buf = io.StringIO()
    Console(file=buf, width=1000, no_color=True).print(table)
    return buf.getvalue().splitlines()


# ----------------------------------------------------------------------------- the bar


def test_bar_at_0_45_and_100_percent() -> None:
    assert progress_bar(trainer(progressPercentage=0)) == "[--------------------] 0%"
    assert progress_bar(trainer(progressPercentage=45)) == "[#########-----------] 45%"
    assert progress_bar(trainer(progressPercentage=100)) == "[####################] 100%"


def test_bar_rounds_down_so_it_is_full_only_when_done() -> None:
    # 47% is 9.4 cells and 99% is 19.8: a partly filled cell shows as empty.
    assert progress_bar(trainer(progressPercentage=47)).startswith("[#########-----------]")
    assert progress_bar(trainer(progressPercentage=99)) == "[###################-] 99%"


def test_bar_with_every_part() -> None:
    bar = progress_bar(
        trainer(
            progressPercentage=45,
            estimatedRemainingSeconds=130,
            metrics=[{"name": "loss", "value": "0.21"}],
        )
    )
    assert bar == "[#########-----------] 45%  ETA 2m10s  loss=0.21"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0, "ETA 0s"), (59, "ETA 59s"), (130, "ETA 2m10s"), (3 * 3600 + 5 * 60, "ETA 3h5m")],
)
def test_eta_in_kubectl_durations(seconds: int, shown: str) -> None:
    assert progress_bar(trainer(estimatedRemainingSeconds=seconds)) == shown


def test_missing_parts_are_left_out() -> None:
    assert progress_bar(None) == ""
    assert progress_bar(trainer()) == ""  # reported, but nothing yet
    assert progress_bar(trainer(metrics=[{"name": "loss", "value": "1.5"}])) == "loss=1.5"
    assert progress_bar(trainer(progressPercentage=10, metrics=[])) == "[##------------------] 10%"
    assert progress_bar(
        trainer(estimatedRemainingSeconds=5, metrics=[{"name": "a", "value": "1"}])
    ) == ("ETA 5s  a=1")


def test_metrics_kept_to_a_width_with_a_count_of_the_rest() -> None:
    many = [(f"m{i}", "0.123456") for i in range(256)]
    text = metrics_text(many, width=40)
    kept = text.split(" ")[:-1]
    assert text.endswith(f" +{256 - len(kept)}")
    assert len(" ".join(kept)) <= 40
    assert kept == [f"m{i}=0.123456" for i in range(len(kept))]  # in the order reported
    assert metrics_text(many[:2], width=40) == "m0=0.123456 m1=0.123456"


def test_a_metric_too_long_alone_is_cut() -> None:
    text = metrics_text([("n" * 64, "v" * 64), ("loss", "1")], width=40)
    assert text == "n" * 37 + "... +1"


def test_the_whole_bar_fits_a_line_whatever_the_metrics() -> None:
    worst = trainer(
        progressPercentage=100,
        estimatedRemainingSeconds=2**31 - 1,
        metrics=[{"name": "n" * 64, "value": "v" * 64}] * 256,
    )
    assert len(progress_bar(worst)) <= 100


# ----------------------------------------------------------------------------- state and rows


def test_state_from_conditions_then_counts() -> None:
    assert trainjob_state(trainjob()) == "Pending"
    running = {"name": "node", "ready": 1, "active": 2, "succeeded": 0, "failed": 0, "suspended": 0}
    assert trainjob_state(trainjob(jobsStatus=[running])) == "Running"
    assert trainjob_state(trainjob(conditions=[cond("Complete")])) == "Complete"
    assert trainjob_state(trainjob(conditions=[cond("Failed")])) == "Failed"
    # A resumed TrainJob keeps its Suspended condition, False, in place.
    resumed = trainjob(conditions=[cond("Suspended", "False")], jobsStatus=[running])
    assert trainjob_state(resumed) == "Running"
    assert trainjob_state(trainjob(conditions=[cond("Suspended")])) == "Suspended"


def test_kind_names() -> None:
    assert all(is_trainjob(n) for n in ("trainjob", "TrainJob", "trainjobs"))
    assert not is_trainjob("pytorchjob") and not is_trainjob(None)


def test_table_rows_and_progress_column_only_when_reported() -> None:
    tfjob = TFJob.parse(
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "tf", "namespace": "ns", "creationTimestamp": NOW},
            "spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": []}}}}},
        }
    )
    node = {"name": "node", "ready": 2, "active": 2, "succeeded": 1, "failed": 0, "suspended": 0}
    quiet = trainjob("quiet", jobsStatus=[node])
    header, *rows = render(jobs_table([tfjob, quiet], namespaces=False))
    assert "PROGRESS" not in header
    assert rows[1].split()[:6] == ["TrainJob", "quiet", "Running", "2", "1", "0"]

    reported = trainjob(
        "llm",
        jobsStatus=[node],
        trainerStatus={
            "progressPercentage": 45,
            "estimatedRemainingSeconds": 130,
            "metrics": [{"name": "loss", "value": "0.21"}],
            "lastUpdatedTime": NOW,
        },
    )
    header, *rows = render(jobs_table([tfjob, quiet, reported], namespaces=True))
    assert header.split()[-1] == "PROGRESS" and header.split()[0] == "NAMESPACE"
    assert rows[2].endswith("[#########-----------] 45%  ETA 2m10s  loss=0.21")
    assert rows[2].split()[:4] == ["ns", "TrainJob", "llm", "Running"]
    assert "[" not in rows[0] and "[" not in rows[1]  # nothing extra without trainerStatus


def test_duration_runs_from_creation_to_the_finishing_condition() -> None:
    later = (dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=130)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )
    done = trainjob(conditions=[{**cond("Complete"), "lastTransitionTime": later}])
    _, row = render(jobs_table([done], namespaces=False))
    assert row.split()[2] == "Complete" and row.split()[-1] == "2m10s"


def test_progress_line_shows_counts_and_bar_only_when_reported() -> None:
    node = {"name": "node", "ready": 1, "active": 1, "succeeded": 0, "failed": 0, "suspended": 0}
    line = trainjob_progress_line(trainjob(jobsStatus=[node]), 5)
    assert line == "[   5s] TrainJob llm Running  node 1/0/0"
    line = trainjob_progress_line(
        trainjob(
            jobsStatus=[node], trainerStatus={"progressPercentage": 50, "lastUpdatedTime": NOW}
        ),
        65,
    )
    assert line == "[ 1m5s] TrainJob llm Running  node 1/0/0  [##########----------] 50%"
