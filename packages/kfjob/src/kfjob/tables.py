"""What the ``kfjob`` commands print: consoles, kubectl-style durations and ages, the jobs and
replica tables, ``wait``'s progress line and a failed job's explanation. Plain text when piped
(one line per change), colours only on a terminal.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from jobcontroller.api import JobModel
from jobcontroller.api import TrainerStatus as JobTrainerStatus
from kfjob.client import ApiFailure, JobClient, job_state, parse_time
from kfjob.trainjobs import TrainJobs, finished_at, trainjob_state
from trainer_operator.api import TrainerStatus, TrainJob

__all__ = [
    "STATE_STYLE",
    "age",
    "console",
    "duration",
    "err_console",
    "exit_info",
    "failure_lines",
    "human",
    "jobs_table",
    "out_console",
    "progress_bar",
    "progress_line",
    "replica_table",
    "state_text",
    "trainjob_failure_lines",
    "trainjob_jobs_table",
    "trainjob_progress_line",
]

#: A job as the CLI lists it: a v1 kind's model or a TrainJob.
AnyJob = JobModel[Any] | TrainJob


def console(*, stderr: bool = False) -> Console:
    """A console that never truncates piped output (a terminal keeps its width)."""
    probe = Console(stderr=stderr)
    width = None if probe.is_terminal else 1000
    return Console(stderr=stderr, highlight=False, width=width)


def out_console() -> Console:
    return console()


def err_console() -> Console:
    return console(stderr=True)


# ----------------------------------------------------------------------------- formatting


def human(seconds: float | None) -> str:
    """kubectl's short durations: 45s, 3m12s, 2h5m, 3d4h."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s" if s < 600 else f"{s // 60}m"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60}m"
    return f"{s // 86400}d{(s % 86400) // 3600}h"


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def age(value: object) -> str:
    when = parse_time(value)
    return human((now() - when).total_seconds()) if when else "-"


def duration(job: AnyJob) -> str:
    """Start to completion (or now); a TrainJob records neither, so creation to its Complete
    or Failed condition (or now)."""
    if isinstance(job, TrainJob):
        created = parse_time(job.metadata.get("creationTimestamp"))
        if created is None:
            return "-"
        return human(((finished_at(job) or now()) - created).total_seconds())
    start = job.status.start_time
    if start is None:
        return "-"
    end = job.status.completion_time or now()
    return human((end - start).total_seconds())


def totals(job: AnyJob) -> tuple[int, int, int]:
    if isinstance(job, TrainJob):
        parts = job.trainjob_status.jobs_status or []
        return (
            sum(s.active for s in parts),
            sum(s.succeeded for s in parts),
            sum(s.failed for s in parts),
        )
    statuses = job.status.replica_statuses.values()
    return (
        sum(s.active for s in statuses),
        sum(s.succeeded for s in statuses),
        sum(s.failed for s in statuses),
    )


STATE_STYLE = {
    "Succeeded": "green",
    "Complete": "green",
    "Failed": "red",
    "Running": "cyan",
    "Restarting": "yellow",
    "Suspended": "magenta",
}


def state_text(state: str) -> Text:
    return Text(state, style=STATE_STYLE.get(state, ""))


def state_of(job: AnyJob) -> str:
    return trainjob_state(job) if isinstance(job, TrainJob) else job_state(job)


def trainer_progress(job: AnyJob) -> str:
    """The job's progress bar (a TrainJob's, or a v1 job's: the same ``trainerStatus``);
    empty for one that reported none."""
    if not isinstance(job, TrainJob):
        return progress_bar(job.status.trainer_status)
    return progress_bar(job.trainjob_status.trainer_status)


def jobs_table(jobs: Sequence[AnyJob], *, namespaces: bool) -> Table:
    """kubectl-style rows; a PROGRESS column (last) only when some job reported progress, so
    a listing of jobs whose pods report none reads as it always has."""
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    columns = ["KIND", "NAME", "STATE", "ACTIVE", "SUCCEEDED", "FAILED", "AGE", "DURATION"]
    if namespaces:
        columns.insert(0, "NAMESPACE")
    bars = [trainer_progress(job) for job in jobs]
    if any(bars):
        columns.append("PROGRESS")
    for c in columns:
        table.add_column(c, no_wrap=True)
    for job, bar in zip(jobs, bars, strict=True):
        active, succeeded, failed = totals(job)
        row: list[str | Text] = [
            job.KIND,
            job.name,
            state_text(state_of(job)),
            str(active),
            str(succeeded),
            str(failed),
            age(job.metadata.get("creationTimestamp")),
            duration(job),
        ]
        if namespaces:
            row.insert(0, job.namespace)
        if any(bars):
            row.append(Text(bar))  # literal: the bar's brackets are not markup
        table.add_row(*row)
    return table


def replica_table(job: JobModel[Any]) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in ("REPLICA", "WANTED", "ACTIVE", "SUCCEEDED", "FAILED"):
        table.add_column(c, no_wrap=True)
    specs = job.replica_specs()
    for rtype, spec in specs.items():
        st = job.status.replica_statuses.get(rtype)
        table.add_row(
            rtype,
            str(spec.replicas if spec.replicas is not None else 1),
            str(st.active if st else 0),
            str(st.succeeded if st else 0),
            str(st.failed if st else 0),
        )
    return table


def progress_line(job: JobModel[Any], elapsed: float) -> str:
    parts = []
    for rtype in job.replica_specs():
        st = job.status.replica_statuses.get(rtype)
        a, s, f = (st.active, st.succeeded, st.failed) if st else (0, 0, 0)
        parts.append(f"{rtype} {a}/{s}/{f}")
    counts = "  ".join(parts)
    line = f"[{human(elapsed):>5}] {job.kind} {job.name} {job_state(job)}  {counts}"
    bar = progress_bar(job.status.trainer_status)
    return f"{line}  {bar}" if bar else line


def failure_lines(client: JobClient, job: JobModel[Any]) -> list[str]:
    cond = job.status.condition("Failed")
    lines = [
        f"{job.kind} {job.namespace}/{job.name} Failed: "
        f"{(cond.reason if cond else '') or '-'}: {(cond.message if cond else '') or '-'}"
    ]
    try:
        pods = client.get_pods(job.name, job.namespace)
    except ApiFailure:
        return lines
    for pod in pods:
        code, reason, restarts = exit_info(pod)
        if (pod.get("status") or {}).get("phase") == "Failed" or (code not in ("", "0")):
            lines.append(
                f"  pod {pod['metadata']['name']}: exit code {code or '-'}"
                f" ({reason or '-'}), restarts {restarts}"
            )
    return lines


def exit_info(pod: dict[str, Any]) -> tuple[str, str, int]:
    """The last exit code and reason of the pod's containers, and its restarts."""
    code, reason, restarts = "", "", 0
    for cs in (pod.get("status") or {}).get("containerStatuses") or ():
        restarts += int(cs.get("restartCount") or 0)
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get(
            "terminated"
        )
        if term and (not code or term.get("exitCode")):
            code, reason = str(term.get("exitCode")), str(term.get("reason") or "")
    return code, reason, restarts


# ----------------------------------------------------------------------------- TrainJob

BAR_WIDTH = 20
#: Room for metrics after the bar: a model may report up to 256 of them, 64 characters a name
#: and a value, and a line must still fit a terminal.
METRICS_WIDTH = 40


def progress_bar(
    status: TrainerStatus | JobTrainerStatus | None,
    *,
    width: int = BAR_WIDTH,
    metrics_width: int = METRICS_WIDTH,
) -> str:
    """``[#########-----------] 45%  ETA 2m10s  loss=0.21``: each part only when reported,
    empty when nothing is. The bar fills by whole cells, rounded down (full only at 100%)."""
    if status is None:
        return ""
    parts = []
    pct = status.progress_percentage
    if pct is not None:
        pct = min(100, max(0, pct))
        filled = pct * width // 100
        parts.append(f"[{'#' * filled}{'-' * (width - filled)}] {pct}%")
    if status.estimated_remaining_seconds is not None:
        parts.append(f"ETA {human(status.estimated_remaining_seconds)}")
    shown = metrics_text([(m.name, m.value) for m in status.metrics or ()], width=metrics_width)
    if shown:
        parts.append(shown)
    return "  ".join(parts)


def metrics_text(metrics: Sequence[tuple[str, str]], *, width: int = METRICS_WIDTH) -> str:
    """``loss=0.21 acc=0.93 +3``: the metrics in the order reported, as many as fit in
    ``width`` characters, then how many more there are; a first one too long alone is cut."""
    out: list[str] = []
    used = 0
    for name, value in metrics:
        item = f"{name}={value}"
        if not out and len(item) > width:
            item = item[: max(0, width - 3)] + "..."
        elif used + len(item) + (1 if out else 0) > width:
            break
        used += len(item) + (1 if out else 0)
        out.append(item)
    more = len(metrics) - len(out)
    return " ".join(out) + (f" +{more}" if more else "")


def trainjob_counts(job: TrainJob) -> str:
    """Per replicated job of its JobSet: active/succeeded/failed jobs."""
    return "  ".join(
        f"{s.name} {s.active}/{s.succeeded}/{s.failed}"
        for s in job.trainjob_status.jobs_status or ()
    )


def trainjob_progress_line(job: TrainJob, elapsed: float) -> str:
    head = f"[{human(elapsed):>5}] TrainJob {job.name} {trainjob_state(job)}"
    tail = [p for p in (trainjob_counts(job), trainer_progress(job)) if p]
    return "  ".join([head, *tail])


def trainjob_jobs_table(job: TrainJob) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    for c in ("REPLICATED JOB", "READY", "ACTIVE", "SUCCEEDED", "FAILED", "SUSPENDED"):
        table.add_column(c, no_wrap=True)
    for s in job.trainjob_status.jobs_status or ():
        table.add_row(
            s.name, str(s.ready), str(s.active), str(s.succeeded), str(s.failed), str(s.suspended)
        )
    return table


def trainjob_failure_lines(trainjobs: TrainJobs, job: TrainJob) -> list[str]:
    cond = job.trainjob_status.condition("Failed")
    lines = [
        f"TrainJob {job.namespace}/{job.name} Failed: "
        f"{(cond.reason if cond else '') or '-'}: {(cond.message if cond else '') or '-'}"
    ]
    try:
        pods = trainjobs.pods(job.name, namespace=job.namespace)
    except ApiFailure:
        return lines
    for pod in pods:
        code, reason, restarts = exit_info(pod)
        if (pod.get("status") or {}).get("phase") == "Failed" or (code not in ("", "0")):
            lines.append(
                f"  pod {pod['metadata']['name']}: exit code {code or '-'}"
                f" ({reason or '-'}), restarts {restarts}"
            )
    return lines
