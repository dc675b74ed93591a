"""HTML building blocks: escaping, the page layout, tables and small widgets.

Everything that comes from the cluster or the user (names, messages, logs, YAML) is user data
and goes through :func:`esc`; the templates here are the only literal markup. Pages load one
stylesheet and one script, both served by ``kfjob ui`` itself, and the Content-Security-Policy
the server sends allows nothing else (no inline script or style, no other origin).
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Iterable, Sequence

from kfjob.ui.model import JobRow, age

__all__ = ["STATES", "esc", "job_row_html", "layout", "state_badge", "table", "time_ago"]

#: The states a job of some kind can be in, for the filter (others appear as jobs show them).
STATES = (
    "Pending",
    "Created",
    "Running",
    "Restarting",
    "Suspended",
    "Succeeded",
    "Complete",
    "Failed",
)


def esc(value: object) -> str:
    """Text made safe for HTML content and quoted attribute values."""
    return html.escape(str(value), quote=True)


def layout(
    *,
    title: str,
    page: str,
    body: str,
    csrf: str,
    context: str,
    nav: str = "",
) -> str:
    """A whole page. ``body`` is markup built here; ``title`` and ``context`` are text."""
    links = [("jobs", "/", "Jobs"), ("render", "/render", "Render")]
    items = "".join(
        f'<li><a href="{href}"{" aria-current=page" if key == (nav or page) else ""}>'
        f"{label}</a></li>"
        for key, href, label in links
    )
    return (
        "<!doctype html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="color-scheme" content="light dark">'
        f'<meta name="csrf-token" content="{esc(csrf)}">'
        f"<title>{esc(title)} · kfjob ui</title>"
        '<link rel="stylesheet" href="/static/ui.css">'
        '<link rel="icon" href="/static/icon.svg" type="image/svg+xml">'
        '<script src="/static/ui.js" defer></script>'
        f'</head><body data-page="{esc(page)}">'
        '<a class="skip" href="#main">Skip to content</a>'
        '<header class="top"><span class="brand">kfjob ui</span>'
        f'<nav aria-label="Main"><ul>{items}</ul></nav>'
        f'<span class="context" title="kubeconfig context and user">{esc(context)}</span>'
        "</header>"
        f'<main id="main" tabindex="-1">{body}</main></body></html>\n'
    )


def table(
    *,
    headers: Sequence[str],
    rows: Iterable[str],
    caption: str,
    empty: str,
    table_id: str = "",
    caption_hidden: bool = True,
) -> str:
    """A table of ready-made ``<tr>`` rows; ``empty`` (text) when there are none."""
    body = "".join(rows)
    ident = f' id="{esc(table_id)}"' if table_id else ""
    cap_cls = ' class="sr-only"' if caption_hidden else ""
    heads = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    if not body:
        return f'<p class="empty"{ident}>{esc(empty)}</p>'
    return (
        f'<div class="scroll"><table{ident}><caption{cap_cls}>{esc(caption)}</caption>'
        f"<thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def cells(values: Iterable[object]) -> str:
    return "".join(f"<td>{esc(v)}</td>" for v in values)


def state_badge(state: str) -> str:
    return f'<span class="state state-{esc(state.lower())}">{esc(state)}</span>'


def time_ago(when: str, *, now: dt.datetime) -> str:
    """An age the page's script keeps current (``<time datetime>``)."""
    if not when:
        return "-"
    return f'<time datetime="{esc(when)}" title="{esc(when)}">{esc(age(when, now=now))}</time>'


def job_url(plural: str, namespace: str, name: str) -> str:
    from urllib.parse import quote

    return f"/jobs/{quote(plural, safe='')}/{quote(namespace, safe='')}/{quote(name, safe='')}"


def job_row_html(row: JobRow, *, now: dt.datetime) -> str:
    """One ``<tr>`` of the jobs table (also what the live updates send)."""
    url = job_url(row.plural, row.namespace, row.name)
    return (
        f'<tr data-key="{esc(row.key)}" data-kind="{esc(row.kind)}" '
        f'data-namespace="{esc(row.namespace)}" data-state="{esc(row.state)}">'
        f"<td>{esc(row.kind)}</td><td>{esc(row.namespace)}</td>"
        f'<th scope="row"><a href="{esc(url)}">{esc(row.name)}</a></th>'
        f"<td>{state_badge(row.state)}</td><td>{time_ago(row.created, now=now)}</td>"
        f'<td class="num">{row.active}</td><td class="num">{row.succeeded}</td>'
        f'<td class="num">{row.failed}</td><td class="num">{row.restarts}</td>'
        f"<td>{esc(row.progress or '-')}</td></tr>"
    )


JOB_HEADERS = (
    "Kind",
    "Namespace",
    "Name",
    "State",
    "Age",
    "Active",
    "Succeeded",
    "Failed",
    "Restarts",
    "Progress",
)


def select(*, name: str, label: str, options: Iterable[str], chosen: str, all_label: str) -> str:
    opts = [f'<option value=""{"" if chosen else " selected"}>{esc(all_label)}</option>']
    for value in options:
        sel = " selected" if value == chosen else ""
        opts.append(f'<option value="{esc(value)}"{sel}>{esc(value)}</option>')
    return (
        f'<label for="filter-{esc(name)}">{esc(label)}</label>'
        f'<select id="filter-{esc(name)}" name="{esc(name)}">{"".join(opts)}</select>'
    )


def alert(message: str, *, kind: str = "error") -> str:
    return f'<div class="alert alert-{esc(kind)}" role="alert">{esc(message)}</div>'
