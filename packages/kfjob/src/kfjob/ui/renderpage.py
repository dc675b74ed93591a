"""The Render page: paste a job's YAML, see offline what the operator creates for it.

The same :func:`kfjob.render.render_job` as ``kfjob render`` (the operator's planner and
validation, no cluster). Errors are shown twice: listed at the top (an alert, each linking to
its line) and beside the line they name in a numbered copy of the input.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from kfjob.render import Rendered, RenderError, load_documents, pod_rows, render_job, to_yaml
from kfjob.ui.html import cells, esc, table
from kfjob.ui.locate import document_nodes, field_line, split_error
from kfjob.ui.pages import env_html

__all__ = ["RenderResult", "render_form", "render_page", "run_render"]

#: The most text the page renders (a job manifest is a few kilobytes).
MAX_INPUT = 1 << 20


@dataclass
class LineError:
    line: int | None
    document: int
    message: str


@dataclass
class RenderResult:
    rendered: list[Rendered] = field(default_factory=list)
    errors: list[LineError] = field(default_factory=list)


def run_render(text: str, *, namespace: str, operator_flags: str) -> RenderResult:
    """Render each job in ``text``; errors carry the line they name where one can be found."""
    out = RenderResult()
    if len(text) > MAX_INPUT:
        out.errors.append(LineError(None, 0, f"the YAML is over {MAX_INPUT} bytes"))
        return out
    try:
        operator_args = shlex.split(operator_flags)
    except ValueError as exc:
        out.errors.append(LineError(None, 0, f"operator flags: {exc}"))
        return out
    try:
        docs = load_documents(text, source="the YAML")
    except RenderError as exc:
        out.errors.append(LineError(exc.line, 0, str(exc)))
        return out
    if not docs:
        out.errors.append(LineError(None, 0, "no job in the YAML: paste a TFJob, PyTorchJob..."))
        return out
    nodes = document_nodes(text)
    for i, doc in enumerate(docs):
        node = nodes[i] if i < len(nodes) else None
        start = node.start_mark.line + 1 if node is not None else None
        try:
            out.rendered.append(
                render_job(doc, namespace=namespace or "default", operator_args=operator_args)
            )
        except RenderError as exc:
            if not exc.errors:
                out.errors.append(LineError(start, i + 1, str(exc)))
            for error in exc.errors:
                path, message = split_error(error)
                line = field_line(node, path) if node is not None and path else start
                out.errors.append(LineError(line, i + 1, f"{path}: {message}" if path else error))
        except SystemExit as exc:  # argparse's exit on a bad operator flag
            out.errors.append(LineError(None, 0, f"operator flags refused ({exc.code})"))
            return out
    return out


def render_form(*, text: str, namespace: str, flags: str, csrf: str, invalid: bool) -> str:
    aria = ' aria-invalid="true" aria-describedby="render-errors"' if invalid else ""
    return (
        '<form method="post" action="/render" class="render-form">'
        f'<input type="hidden" name="csrf" value="{esc(csrf)}">'
        '<label for="yaml">Job YAML (one or more documents)</label>'
        f'<textarea id="yaml" name="yaml" rows="18" spellcheck="false" required{aria}>'
        f"{esc(text)}</textarea>"
        '<div class="row"><div><label for="ns">Namespace (when the YAML names none)</label>'
        f'<input id="ns" name="namespace" value="{esc(namespace)}" placeholder="default"></div>'
        '<div><label for="flags">Operator flags</label>'
        f'<input id="flags" name="flags" value="{esc(flags)}" '
        'placeholder="--gang-scheduler-name=volcano" aria-describedby="flags-help">'
        '<small id="flags-help">As given to the operator\'s <code>run</code>.</small></div></div>'
        '<button type="submit">Render</button></form>'
    )


def _numbered(text: str, errors: Sequence[LineError]) -> str:
    by_line: dict[int, list[str]] = {}
    for e in errors:
        if e.line is not None:
            by_line.setdefault(e.line, []).append(e.message)
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        msgs = by_line.get(n)
        cls = ' class="bad"' if msgs else ""
        note = "".join(f'<span class="line-error">{esc(m)}</span>' for m in msgs or ())
        rows.append(f'<li id="L{n}"{cls}><code>{esc(line) or " "}</code>{note}</li>')
    label = "Your YAML, with the errors at their lines"
    return f'<ol class="numbered" aria-label="{label}">{"".join(rows)}</ol>'


def _result(r: Rendered) -> str:
    parts = [f"<h3>{esc(r.kind.kind)} {esc(r.namespace)}/{esc(r.name)}</h3>"]
    kinds: dict[str, int] = {}
    for o in r.objects:
        kinds[str(o.get("kind"))] = kinds.get(str(o.get("kind")), 0) + 1
    summary = ", ".join(f"{n} {k}" for k, n in kinds.items()) or "nothing"
    parts.append(f"<p>The operator creates: <strong>{esc(summary)}</strong>.</p>")
    parts += [f'<p class="note">{esc(n)}</p>' for n in r.notes]
    parts += [
        f'<p class="warning">{esc(e.reason)}: {esc(e.message)}</p>'
        for e in r.events
        if e.type == "Warning"
    ]
    rows = [
        f"<tr><th scope=row>{esc(p.pod)}</th>"
        f"{cells([p.replica_type, p.index, p.role, p.ports, p.command])}</tr>"
        for p in pod_rows(r.objects)
    ]
    parts.append(
        table(
            headers=("Pod", "Replica", "Index", "Role", "Ports", "Command"),
            rows=rows,
            caption=f"Pods of {r.name}",
            empty="No pods yet.",
        )
    )
    parts.append(
        "<details><summary>Environment (as <code>kfjob render --env</code>)</summary>"
        f"{env_html(r.pods)}</details>"
    )
    parts.append(
        "<details><summary>Every object (YAML)</summary>"
        f'<pre class="yaml" tabindex="0">{esc(to_yaml(r.objects))}</pre></details>'
    )
    return f'<section class="rendered">{"".join(parts)}</section>'


def _line_link(line: int | None) -> str:
    return f'<a href="#L{line}">line {line}</a>: ' if line else ""


def render_page(
    *, text: str, namespace: str, flags: str, csrf: str, result: RenderResult | None
) -> str:
    errors = result.errors if result else []
    body = [
        "<h1>Render</h1>"
        '<p class="lead">Paste a job and see, offline, what its operator creates for it: the '
        "operator's own planner and admission checks, as <code>kfjob render</code>. "
        "Nothing is sent to the cluster.</p>"
    ]
    if errors:
        items = "".join(f"<li>{_line_link(e.line)}{esc(e.message)}</li>" for e in errors)
        body.append(
            '<div id="render-errors" class="alert alert-error" role="alert" tabindex="-1">'
            f"<h2>The job would be refused</h2><ul>{items}</ul></div>"
        )
    body.append(
        render_form(text=text, namespace=namespace, flags=flags, csrf=csrf, invalid=bool(errors))
    )
    if errors and text:
        body.append(f'<section aria-label="Errors in place">{_numbered(text, errors)}</section>')
    if result and result.rendered:
        body.append('<h2 id="result">What the operator creates</h2>')
        body += [_result(r) for r in result.rendered]
    return "".join(body)
