"""The jobs page and a job's page, as HTML (pure: the data comes in, markup goes out).

A job's page is made of sections (:func:`job_sections`) that the live stream re-sends whenever
one changes, so the page the browser first loads and the updates are the same markup.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from kfjob.client import parse_time
from kfjob.render import RenderError, pod_env, render_job, to_yaml
from kfjob.ui.html import (
    JOB_HEADERS,
    STATES,
    cells,
    esc,
    job_row_html,
    job_url,
    select,
    state_badge,
    table,
    time_ago,
)
from kfjob.ui.model import (
    JobRow,
    Permission,
    ServedKind,
    conditions,
    event_rows,
    human,
    job_state,
    pod_row,
    progress,
    replica_rows,
)

__all__ = ["env_html", "env_section", "job_page", "job_sections", "jobs_page"]

Obj = dict[str, Any]

#: The live sections of a job's page, in page order.
SECTIONS = ("summary", "conditions", "replicas", "pods", "events", "env", "yaml")


def jobs_page(
    *,
    rows: Sequence[JobRow],
    kinds: Sequence[str],
    namespaces: Sequence[str],
    filters: Mapping[str, str],
    notes: Sequence[str],
    now: dt.datetime,
) -> str:
    """The jobs table with its filters; the script applies the filters as rows come and go,
    and without the script the filter form is a plain GET."""
    kind, ns, state = (
        filters.get("kind", ""),
        filters.get("namespace", ""),
        filters.get("state", ""),
    )
    shown = [
        r
        for r in rows
        if (not kind or r.kind == kind)
        and (not ns or r.namespace == ns)
        and (not state or r.state == state)
    ]
    states = list(STATES) + sorted({r.state for r in rows} - set(STATES))
    all_ns = sorted(set(namespaces) | {r.namespace for r in rows})
    selects = "".join(
        f"<div>{select(name=n, label=label, options=opts, chosen=chosen, all_label=every)}</div>"
        for n, label, opts, chosen, every in (
            ("kind", "Kind", kinds, kind, "All kinds"),
            ("namespace", "Namespace", all_ns, ns, "All namespaces"),
            ("state", "State", states, state, "All states"),
        )
    )
    form = (
        '<form class="filters" method="get" action="/" role="search" aria-label="Filter jobs">'
        f'{selects}<div><button type="submit" class="nojs">Filter</button></div></form>'
    )
    body_rows = "".join(job_row_html(r, now=now) for r in shown)
    heads = "".join(f'<th scope="col">{esc(h)}</th>' for h in JOB_HEADERS)
    empty_hidden = " hidden" if shown else ""
    note_html = "".join(f'<p class="note">{esc(n)}</p>' for n in notes)
    return (
        '<h1>Jobs</h1><p class="lead">Kinds served here: '
        f"{esc(', '.join(kinds) or 'none (no job CRD is installed)')}.</p>{note_html}{form}"
        '<p id="live" class="live" role="status" aria-live="polite">Loading live updates…</p>'
        '<div class="scroll"><table id="jobs"><caption class="sr-only">Training jobs</caption>'
        f"<thead><tr>{heads}</tr></thead><tbody>{body_rows}</tbody></table></div>"
        f'<p id="no-jobs" class="empty"{empty_hidden}>No jobs match.</p>'
    )


def _summary(
    kind: ServedKind,
    job: Obj,
    csrf: str,
    now: dt.datetime,
    permissions: Mapping[str, Permission],
) -> str:
    meta = job.get("metadata") or {}
    status = job.get("status") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    state = job_state(kind, job)
    start, end = status.get("startTime"), status.get("completionTime")
    facts = [
        ("State", state_badge(state)),
        ("Created", time_ago(str(meta.get("creationTimestamp") or ""), now=now)),
        ("Started", esc(start or "-")),
        ("Completed", esc(end or "-")),
        ("Duration", esc(elapsed(job, now))),
    ]
    prog = progress(kind, job)
    if prog:
        facts.append(("Progress", esc(prog)))
    metrics = (status.get("trainerStatus") or {}).get("metrics") or []
    if metrics:
        facts.append(
            ("Metrics", esc(", ".join(f"{m.get('name')}={m.get('value')}" for m in metrics)))
        )
    dl = "".join(f"<dt>{esc(k)}</dt><dd>{v}</dd>" for k, v in facts)
    url = job_url(kind.plural, ns, name)
    what = f"{kind.kind} {ns}/{name}"
    suspended = kind.suspended(job)
    finished = state in ("Succeeded", "Failed", "Complete")
    offered: list[tuple[str, str, str, bool]] = []  # action, label, confirmation, danger
    if suspended:
        offered.append(("resume", "Resume", f"Resume {what}? Its pods are created again.", False))
    elif not finished:
        offered.append(
            (
                "suspend",
                "Suspend",
                f"Suspend {what}? Its pods are deleted until it is resumed.",
                False,
            )
        )
    offered.append(
        (
            "delete",
            "Delete",
            f"Delete {what}? Its pods and services are deleted with it. This cannot be undone.",
            True,
        )
    )
    buttons, notes = [], []
    for action, label, confirm, danger in offered:
        permission = permissions.get(action, Permission(None))
        if permission.allowed is False:
            notes.append(
                f'<p class="note" id="why-{action}">{esc(label)}: {esc(permission.why)}</p>'
            )
        buttons.append(
            _action(url, action, label, confirm, csrf, danger=danger, permission=permission)
        )
    return (
        f'<dl class="facts">{dl}</dl>'
        f'<div class="actions" aria-label="Actions" role="group">{"".join(buttons)}</div>'
        f"{''.join(notes)}"
    )


def _action(
    url: str,
    action: str,
    label: str,
    confirm: str,
    csrf: str,
    *,
    danger: bool,
    permission: Permission,
) -> str:
    """An action's form; its button disabled, saying why (a tooltip, and the note under the
    buttons it is described by), when the API server said the user may not."""
    cls = ' class="danger"' if danger else ""
    state = ""
    if permission.allowed is False:
        state = f' disabled title="{esc(permission.why)}" aria-describedby="why-{action}"'
    elif permission.allowed is None and permission.why:
        state = f' title="{esc(permission.why)}"'
    return (
        f'<form method="post" action="{esc(url)}/{action}" data-action="{action}" '
        f'data-confirm="{esc(confirm)}"><input type="hidden" name="csrf" value="{esc(csrf)}">'
        f'<button type="submit"{cls}{state}>{esc(label)}</button></form>'
    )


def _conditions(job: Obj, now: dt.datetime) -> str:
    items = []
    for c in conditions(job):
        cls = "on" if c.status == "True" else "off"
        items.append(
            f'<li class="cond cond-{cls}"><span class="when">{time_ago(c.when, now=now)}</span>'
            f'<span class="what"><strong>{esc(c.type)}</strong> '
            f'<span class="status">{esc(c.status)}</span>'
            f"{' · ' + esc(c.reason) if c.reason else ''}</span>"
            f"{f'<span class=msg>{esc(c.message)}</span>' if c.message else ''}</li>"
        )
    if not items:
        return '<p class="empty">No conditions yet: the operator has not seen the job.</p>'
    return f'<ol class="timeline">{"".join(items)}</ol>'


def _replicas(kind: ServedKind, job: Obj) -> str:
    rows = [
        f"<tr><th scope=row>{esc(r.name)}</th>"
        f"{cells([r.wanted or '-', r.active, r.succeeded, r.failed])}</tr>"
        for r in replica_rows(kind, job)
    ]
    what = "Replicated job" if kind.job_kind is None else "Replica type"
    return table(
        headers=(what, "Wanted", "Active", "Succeeded", "Failed"),
        rows=rows,
        caption="Replicas",
        empty="No replicas reported yet.",
    )


def _pods(pods: Sequence[Obj], now: dt.datetime) -> str:
    rows = []
    for pod in pods:
        r = pod_row(pod)
        rows.append(
            f'<tr data-pod="{esc(r.name)}" data-containers="{esc(" ".join(r.containers))}">'
            f'<th scope="row">{esc(r.name)}</th><td>{esc(r.replica or "-")}</td>'
            f'<td><span class="phase phase-{esc(r.phase.lower())}">{esc(r.phase)}</span></td>'
            f"{cells([r.node or '-'])}<td class=num>{r.restarts}</td>"
            f"{cells([r.exit_code or '-', r.reason or '-'])}<td>{time_ago(r.created, now=now)}</td>"
            f'<td><button type="button" class="show-logs" data-pod="{esc(r.name)}" '
            f'aria-label="Logs of {esc(r.name)}">Logs</button></td></tr>'
        )
    return table(
        headers=("Pod", "Replica", "Phase", "Node", "Restarts", "Exit code", "Reason", "Age", ""),
        rows=rows,
        caption="Pods",
        empty="No pods.",
        table_id="pods-table",
    )


def _events(events: Sequence[Obj], now: dt.datetime) -> str:
    rows = []
    for when, type_, reason, obj, message, count in event_rows(events)[-50:]:
        warn = ' class="warning"' if type_ == "Warning" else ""
        times = f" (x{count})" if count > 1 else ""
        rows.append(
            f"<tr{warn}><td>{time_ago(when, now=now)}{esc(times)}</td>"
            f"{cells([type_, reason, obj, message])}</tr>"
        )
    return table(
        headers=("Age", "Type", "Reason", "Object", "Message"),
        rows=rows,
        caption="Events (the last 50)",
        empty="No events (the API server keeps them for an hour).",
    )


def env_html(pods: Sequence[Obj], note: str = "") -> str:
    """Each pod's env per container, as ``kfjob render --env`` prints it."""
    parts = [f'<p class="note">{esc(note)}</p>'] if note else []
    for pod in pods:
        name = str((pod.get("metadata") or {}).get("name") or "")
        lines = [f"# {name}"]
        for container, env in pod_env(pod).items():
            lines.append(f"  {container}:")
            for key, value in env.items():
                first, *more = value.splitlines() or [""]
                lines.append(f"    {key}={first}")
                lines += [f"    {m}" for m in more]
        parts.append(f'<pre class="env">{esc(chr(10).join(lines))}</pre>')
    return "".join(parts) or '<p class="empty">No pods yet.</p>'


def env_section(kind: ServedKind, job: Obj, pods: Sequence[Obj]) -> str:
    """The env of the job's pods; with none (suspended, not yet created), the env the
    operator would write, rendered offline from the job's spec."""
    if pods or kind.job_kind is None:
        return env_html(pods)
    spec_only = {k: v for k, v in job.items() if k != "status"}
    try:
        rendered = render_job(spec_only, controller=kind.job_kind.controller())
    except RenderError as exc:
        return f'<p class="note">{esc(f"No pods, and the job does not render: {exc}")}</p>'
    return env_html(
        rendered.pods, note="No pods now: the env the operator writes, rendered offline."
    )


def job_yaml(job: Obj) -> str:
    shown = dict(job)
    meta = dict(shown.get("metadata") or {})
    meta.pop("managedFields", None)
    shown["metadata"] = meta
    text = to_yaml([shown]).removeprefix("---\n")
    return f'<pre class="yaml" tabindex="0">{esc(text)}</pre>'


def job_sections(
    kind: ServedKind,
    job: Obj,
    *,
    pods: Sequence[Obj],
    events: Sequence[Obj],
    env: str,
    csrf: str,
    now: dt.datetime,
    permissions: Mapping[str, Permission],
) -> dict[str, str]:
    """The page's live sections, by id (``env`` comes ready-made: :func:`env_section`;
    ``permissions``: per action, whether the user may, as ``Access.actions`` says)."""
    return {
        "summary": _summary(kind, job, csrf, now, permissions),
        "conditions": _conditions(job, now),
        "replicas": _replicas(kind, job),
        "pods": _pods(pods, now),
        "events": _events(events, now),
        "env": env,
        "yaml": job_yaml(job),
    }


_TITLES = {
    "summary": "",
    "conditions": "Conditions",
    "replicas": "Replicas",
    "pods": "Pods",
    "events": "Events",
    "env": "Environment the operator wrote",
    "yaml": "YAML",
}


def job_page(kind: ServedKind, job: Obj, sections: Mapping[str, str], *, stream: str) -> str:
    meta = job.get("metadata") or {}
    ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    parts = [
        f'<p class="crumbs"><a href="/">Jobs</a> / {esc(kind.kind)} / {esc(ns)}</p>'
        f'<h1><span class="kind">{esc(kind.kind)}</span> {esc(name)}</h1>'
        f'<div id="job" data-stream="{esc(stream)}" data-namespace="{esc(ns)}">'
        '<p id="live" class="live" role="status" aria-live="polite">Loading live updates…</p>'
        '<div id="action-result" role="alert" aria-live="assertive"></div>'
    ]
    for key in SECTIONS:
        title = _TITLES[key]
        inner = f'<div class="section-body" id="sec-{key}">{sections.get(key, "")}</div>'
        if key in ("env", "yaml"):
            parts.append(
                f'<section aria-labelledby="h-{key}"><details id="d-{key}">'
                f'<summary><h2 id="h-{key}">{esc(title)}</h2></summary>{inner}</details></section>'
            )
        elif title:
            parts.append(
                f'<section aria-labelledby="h-{key}"><h2 id="h-{key}">{esc(title)}</h2>{inner}'
                "</section>"
            )
        else:
            parts.append(f'<section aria-label="Summary">{inner}</section>')
        if key == "pods":
            parts.append(LOGS_PANEL)
    parts.append("</div>" + CONFIRM_DIALOG)
    return "".join(parts)


LOGS_PANEL = (
    '<section aria-labelledby="h-logs" class="logs"><h2 id="h-logs">Logs</h2>'
    '<form id="log-form" class="logform">'
    '<div><label for="log-pod">Pod</label><select id="log-pod" name="pod"></select></div>'
    '<div><label for="log-container">Container</label>'
    '<select id="log-container" name="container"></select></div>'
    '<div class="check"><input type="checkbox" id="log-follow" name="follow" checked>'
    '<label for="log-follow">Follow</label></div>'
    '<div class="check"><input type="checkbox" id="log-previous" name="previous">'
    '<label for="log-previous">Previous container</label></div>'
    '<div><button type="submit" id="log-start">Show logs</button> '
    '<button type="button" id="log-stop" disabled>Stop</button></div></form>'
    '<p id="log-status" class="live" role="status" aria-live="polite">'
    "Choose a pod to see its log.</p>"
    '<pre id="log-output" class="log" tabindex="0" aria-label="Log output"></pre></section>'
)

CONFIRM_DIALOG = (
    '<dialog id="confirm" aria-labelledby="confirm-title" aria-describedby="confirm-text">'
    '<form method="dialog"><h2 id="confirm-title">Are you sure?</h2><p id="confirm-text"></p>'
    '<div class="buttons"><button value="cancel" id="confirm-cancel">Cancel</button> '
    '<button value="ok" id="confirm-ok" class="danger">Confirm</button></div></form></dialog>'
)


def elapsed(job: Obj, now: dt.datetime) -> str:
    """Run time so far (or in all, once completed)."""
    status = job.get("status") or {}
    start = parse_time(status.get("startTime"))
    end = parse_time(status.get("completionTime")) or now
    return human((end - start).total_seconds()) if start else "-"
