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
from kfjob.client import ApiFailure, JobClient, job_state, parse_time

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
    "progress_line",
    "replica_table",
    "state_text",
]


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


def duration(job: JobModel[Any]) -> str:
    start = job.status.start_time
    if start is None:
        return "-"
    end = job.status.completion_time or now()
    return human((end - start).total_seconds())


def totals(job: JobModel[Any]) -> tuple[int, int, int]:
    statuses = job.status.replica_statuses.values()
    return (
        sum(s.active for s in statuses),
        sum(s.succeeded for s in statuses),
        sum(s.failed for s in statuses),
    )


STATE_STYLE = {
    "Succeeded": "green",
    "Failed": "red",
    "Running": "cyan",
    "Restarting": "yellow",
    "Suspended": "magenta",
}


def state_text(state: str) -> Text:
    return Text(state, style=STATE_STYLE.get(state, ""))


def jobs_table(jobs: Sequence[JobModel[Any]], *, namespaces: bool) -> Table:
    table = Table(box=None, pad_edge=False, show_edge=False, header_style="bold")
    columns = ["KIND", "NAME", "STATE", "ACTIVE", "SUCCEEDED", "FAILED", "AGE", "DURATION"]
    if namespaces:
        columns.insert(0, "NAMESPACE")
    for c in columns:
        table.add_column(c, no_wrap=True)
    for job in jobs:
        active, succeeded, failed = totals(job)
        row: list[str | Text] = [
            job.kind,
            job.name,
            state_text(job_state(job)),
            str(active),
            str(succeeded),
            str(failed),
            age(job.metadata.get("creationTimestamp")),
            duration(job),
        ]
        if namespaces:
            row.insert(0, job.namespace)
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
    return f"[{human(elapsed):>5}] {job.kind} {job.name} {job_state(job)}  {counts}"


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
