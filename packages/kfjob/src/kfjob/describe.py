"""``kfjob describe``: a job's state, reported progress, conditions, replicas (or a TrainJob's
replicated jobs), pods and recent events, as ``kubectl describe`` lays them out."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from jobcontroller.api import TrainerStatus as JobTrainerStatus
from jobcontroller.api import format_time
from kfjob.client import JobClient, job_state
from kfjob.tables import (
    age,
    duration,
    exit_info,
    out_console,
    progress_bar,
    replica_table,
    state_text,
    trainjob_jobs_table,
)
from kfjob.trainjobs import TrainJobs, finished_at, trainjob_state
from trainer_operator.api import TrainerStatus, TrainJob

__all__ = ["describe"]


def describe(client: JobClient, *, kind: str, name: str, events: int) -> int:
    """Print the job ``kind``/``name`` with its last ``events`` events; 0."""
    if kind == TrainJob.KIND:
        return _describe_trainjob(client, name=name, events=events)
    job = client.get(name, job_kind=kind)
    out = out_console()
    created = job.metadata.get("creationTimestamp")
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("Name:", f"{job.kind} {job.namespace}/{job.name}")
    head.add_row("State:", state_text(job_state(job)))
    head.add_row(
        "Created:",
        f"{created or '-'} ({age(created)} ago)",
    )
    start, end = job.status.start_time, job.status.completion_time
    head.add_row("Started:", format_time(start) if start else "-")
    head.add_row("Completed:", format_time(end) if end else "-")
    head.add_row("Duration:", duration(job))
    _progress_rows(head, job.status.trainer_status)
    out.print(head)

    _print_conditions(
        [
            (c.type, c.status, c.reason or "", c.last_transition_time, c.message or "")
            for c in job.status.conditions
        ]
    )
    out.print(Text("\nReplicas:", style="bold"))
    out.print(replica_table(job))
    _print_pods(client.get_pods(name, job.namespace))
    _print_events(client.events(name, job.namespace, kind)[-events:])
    return 0


def _progress_rows(head: Table, trainer: TrainerStatus | JobTrainerStatus | None) -> None:
    """The whole of what the pods reported: the bar without metrics, then each metric."""
    if trainer is None:
        return
    bar = progress_bar(trainer.model_copy(update={"metrics": None}))
    head.add_row("Progress:", Text(bar or "-"))
    for metric in trainer.metrics or ():
        head.add_row("", Text(f"{metric.name}={metric.value}"))
    when = trainer.last_updated_time
    head.add_row(
        "Reported:", f"{format_time(when)} ({age(format_time(when))} ago)" if when else "-"
    )


def _describe_trainjob(client: JobClient, *, name: str, events: int) -> int:
    trainjobs = TrainJobs(client)
    job = trainjobs.get(name)
    status = job.trainjob_status
    out = out_console()
    created = job.metadata.get("creationTimestamp")
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("Name:", f"TrainJob {job.namespace}/{job.name}")
    head.add_row("Runtime:", f"{job.spec.runtime_ref.kind} {job.spec.runtime_ref.name}")
    head.add_row("State:", state_text(trainjob_state(job)))
    head.add_row("Created:", f"{created or '-'} ({age(created)} ago)")
    end = finished_at(job)
    head.add_row("Completed:", format_time(end) if end else "-")
    head.add_row("Duration:", duration(job))
    _progress_rows(head, status.trainer_status)
    out.print(head)

    _print_conditions(
        [
            (c.type, c.status, c.reason, c.last_transition_time, c.message)
            for c in status.conditions or ()
        ]
    )
    out.print(Text("\nJobs:", style="bold"))
    out.print(trainjob_jobs_table(job))
    _print_pods(trainjobs.pods(name, namespace=job.namespace))
    _print_events(trainjobs.events(name, namespace=job.namespace)[-events:])
    return 0


def _print_conditions(rows: Sequence[tuple[str, str, str, dt.datetime | None, str]]) -> None:
    out = out_console()
    out.print(Text("\nConditions:", style="bold"))
    conds = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in ("TYPE", "STATUS", "REASON", "AGE", "MESSAGE"):
        conds.add_column(c, no_wrap=c != "MESSAGE")
    for ctype, cstatus, reason, when, message in rows:
        conds.add_row(ctype, cstatus, reason, age(when.isoformat() if when else None), message)
    out.print(conds)


def _print_pods(pod_list: Sequence[dict[str, Any]]) -> None:
    out = out_console()
    out.print(Text("\nPods:", style="bold"))
    pods = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in ("NAME", "PHASE", "EXIT", "REASON", "RESTARTS", "NODE", "AGE"):
        pods.add_column(c, no_wrap=True)
    for pod in pod_list:
        code, reason, restarts = exit_info(pod)
        pods.add_row(
            str(pod["metadata"]["name"]),
            str((pod.get("status") or {}).get("phase") or "-"),
            code or "-",
            reason or "-",
            str(restarts),
            str((pod.get("spec") or {}).get("nodeName") or "-"),
            age(pod["metadata"].get("creationTimestamp")),
        )
    out.print(pods)


def _print_events(events: Sequence[dict[str, Any]]) -> None:
    out = out_console()
    out.print(Text("\nEvents:", style="bold"))
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in ("AGE", "TYPE", "REASON", "OBJECT", "MESSAGE"):
        table.add_column(c, no_wrap=c != "MESSAGE")
    for ev in events:
        obj = ev.get("involvedObject") or {}
        when = (
            ev.get("lastTimestamp")
            or ev.get("eventTime")
            or ev["metadata"].get("creationTimestamp")
        )
        count = int(ev.get("count") or 1)
        table.add_row(
            age(when) + (f" (x{count})" if count > 1 else ""),
            Text(str(ev.get("type") or ""), style="yellow" if ev.get("type") == "Warning" else ""),
            str(ev.get("reason") or ""),
            f"{str(obj.get('kind', '')).lower()}/{obj.get('name', '')}",
            str(ev.get("message") or ""),
        )
    out.print(table if events else Text("  <none>"))
