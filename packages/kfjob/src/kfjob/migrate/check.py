"""``kfjob migrate --check``: both sides rendered offline by the operators' own planners, and
what differs in their pods.

The v1 side is :func:`kfjob.render.render_job` (the v1 operator's planner). The TrainJob side
is our TrainJob controller's planner (:func:`trainer_operator.planner.plan_trainjob`) on the
runtime the migration names (the generated TrainingRuntime, or the shipped one kfjob carries),
which plans the JobSet; the JobSet's pods are what its controller makes of it: each replicated
job's pod template, ``replicas`` Jobs of ``parallelism`` pods, each pod's completion index
where its env reads it.

Pods are paired in rank order (v1: Master then Workers, MPI's workers then its launcher; the
TrainJob: its ``node`` pods by index, then the launcher), and each pair's main containers
compared: image, command and args, resources, env; other containers by name. Identical
differences of consecutive pairs are shown once.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from jobcontroller import CreateObject, Observed
from kfjob.migrate.base import COMPLETION_INDEX, NODE, MigrateError, Migration
from kfjob.migrate.runtimes import shipped_runtime
from kfjob.render import PLACEHOLDER_UID, render_job
from trainer_operator import TrainingRuntime, TrainJob
from trainer_operator.planner import RUNTIME, plan_trainjob

__all__ = ["Check", "PodView", "check", "report_lines"]

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class PodView:
    """One pod's main container, as compared."""

    name: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: dict[str, str]
    resources: Obj
    others: tuple[str, ...]
    """Its other containers (init containers marked)."""


@dataclass(slots=True)
class Check:
    migration: Migration
    v1: list[PodView]
    trainjob: list[PodView]
    not_rendered: str | None = None
    """Why the TrainJob side has no pods (its planner refused it)."""
    events: list[str] = field(default_factory=list)


def _env(container: Obj, index: int | None) -> dict[str, str]:
    out: dict[str, str] = {}
    for e in container.get("env") or ():
        if "valueFrom" in e:
            ref = ((e["valueFrom"] or {}).get("fieldRef") or {}).get("fieldPath")
            if ref == COMPLETION_INDEX and index is not None:
                out[str(e["name"])] = str(index)  # what the pod reads
            else:
                out[str(e["name"])] = f"(from {json.dumps(e['valueFrom'], sort_keys=True)})"
        else:
            out[str(e["name"])] = str(e.get("value", ""))
    return out


def _view(name: str, spec: Obj, main: str | None, index: int | None = None) -> PodView:
    containers: list[Obj] = list(spec.get("containers") or [])
    chosen = next((c for c in containers if c.get("name") == main), containers[0])
    others = [str(c.get("name")) for c in containers if c is not chosen]
    others += [f"{c.get('name')} (init)" for c in spec.get("initContainers") or ()]
    return PodView(
        name=name,
        image=str(chosen.get("image") or ""),
        command=tuple(str(a) for a in chosen.get("command") or ()),
        args=tuple(str(a) for a in chosen.get("args") or ()),
        env=_env(chosen, index),
        resources=dict(chosen.get("resources") or {}),
        others=tuple(others),
    )


def _v1_pods(migration: Migration, namespace: str) -> list[PodView]:
    rendered = render_job(migration.source, namespace=namespace)
    main = rendered.kind.model.DEFAULT_CONTAINER_NAME
    pods: list[PodView] = []
    for obj in rendered.objects:
        if obj.get("kind") == "Pod":
            pods.append(_view(str(obj["metadata"]["name"]), obj.get("spec") or {}, main))
        elif obj.get("kind") == "Job":  # MPI's launcher
            tpl = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
            pods.append(_view(f"{obj['metadata']['name']} (Job)", tpl, main))
    return pods


def _jobset_pods(jobset: Obj) -> list[PodView]:
    name = str(jobset["metadata"]["name"])
    rjobs = sorted(
        (jobset.get("spec") or {}).get("replicatedJobs") or (),
        key=lambda r: r.get("name") != NODE,  # the nodes first, as v1's workers come first
    )
    pods: list[PodView] = []
    for rjob in rjobs:
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        pod_spec = (job_spec.get("template") or {}).get("spec") or {}
        for j in range(int(rjob.get("replicas") or 1)):
            for i in range(int(job_spec.get("parallelism") or 1)):
                pod = f"{name}-{rjob['name']}-{j}-{i}"
                pods.append(_view(pod, pod_spec, NODE, index=i))
    return pods


def _valid(obj: Obj, model: type[TrainJob] | type[TrainingRuntime]) -> None:
    try:
        model.parse(obj)
    except ValidationError as exc:
        errors = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise MigrateError(f"the {obj.get('kind')} written would be refused: {errors}") from exc


def check(
    migration: Migration, *, namespace: str = "default", now: dt.datetime | None = None
) -> Check:
    """Both sides' pods (module docstring). Raises :class:`MigrateError` when the objects the
    migration wrote would be refused (a bug of the migration, never the user's)."""
    v1 = _v1_pods(migration, namespace)
    trainjob = copy.deepcopy(migration.trainjob)
    meta = trainjob["metadata"]
    meta.setdefault("namespace", namespace)
    meta["uid"] = PLACEHOLDER_UID
    _valid(trainjob, TrainJob)
    if migration.runtime is not None:
        _valid(migration.runtime, TrainingRuntime)
        runtime = migration.runtime
    else:
        runtime = shipped_runtime(trainjob["spec"]["runtimeRef"]["name"])
    plan = plan_trainjob(
        trainjob, Observed(extra={RUNTIME: runtime}), now=now or dt.datetime.now(dt.UTC)
    )
    result = Check(migration=migration, v1=v1, trainjob=[])
    result.events = [f"{e.reason}: {e.message}" for e in plan.events]
    jobsets = [a.body for a in plan.actions if isinstance(a, CreateObject) and a.kind == "JobSet"]
    if jobsets:
        result.trainjob = _jobset_pods(jobsets[0])
        return result
    result.not_rendered = (
        "; ".join(e.message for e in plan.events) or "the planner created no JobSet"
    )
    return result


# ------------------------------------------------------------------------------ report


def _argv(p: PodView) -> str:
    parts = [*p.command, *p.args]
    text = " ".join(parts)
    return text if p.command else f"(image entrypoint) {text}".rstrip()


def _pair_lines(a: PodView, b: PodView) -> list[str]:
    out: list[str] = []
    if a.image != b.image:
        out.append(f"image: {a.image} -> {b.image}")
    if (a.command, a.args) != (b.command, b.args):
        out.append(f"command: {_argv(a)} -> {_argv(b)}")
    if a.resources != b.resources:
        out.append(
            f"resources: {json.dumps(a.resources, sort_keys=True)} -> "
            f"{json.dumps(b.resources, sort_keys=True)}"
        )
    if set(a.others) != set(b.others):
        out.append(f"other containers: {list(a.others) or '-'} -> {list(b.others) or '-'}")
    for name in sorted({*a.env, *b.env}):
        if name not in b.env:
            out.append(f"env - {name}={a.env[name]}")
        elif name not in a.env:
            out.append(f"env + {name}={b.env[name]}")
        elif a.env[name] != b.env[name]:
            out.append(f"env ~ {name}: {a.env[name]} -> {b.env[name]}")
    return out


def _same_line(p: PodView) -> str:
    res = json.dumps(p.resources, sort_keys=True) if p.resources else "none"
    return f"same: image {p.image}; command {_argv(p)}; resources {res}"


def report_lines(result: Check) -> list[str]:
    """A readable report of ``result`` (each line without its newline)."""
    m = result.migration
    lines = [f"{m.kind} {m.name} -> TrainJob {m.name} on {m.runtime_ref}"]
    lines += [f"  warning: {w}" for w in m.warnings]
    lines += [f"  note: {n}" for n in m.notes]
    if result.not_rendered is not None:
        lines.append(f"  TrainJob pods: not rendered: {result.not_rendered}")
        lines.append(f"  v1 pods ({len(result.v1)}): {', '.join(p.name for p in result.v1)}")
        return lines
    lines += [f"  planner: {e}" for e in result.events]
    lines.append(f"  pods: {len(result.v1)} -> {len(result.trainjob)}")
    pairs = list(zip(result.v1, result.trainjob, strict=False))
    groups: list[tuple[list[tuple[PodView, PodView]], list[str]]] = []
    for a, b in pairs:
        diff = _pair_lines(a, b)
        if groups and groups[-1][1] == diff:
            groups[-1][0].append((a, b))
        else:
            groups.append(([(a, b)], diff))
    for members, diff in groups:
        names = ", ".join(f"{a.name} -> {b.name}" for a, b in members)
        lines.append(f"  {names}")
        lines += [f"    {d}" for d in diff] or [f"    {_same_line(members[0][0])}"]
        if diff and not any(d.startswith(("image", "command")) for d in diff):
            lines.append(f"    {_same_line(members[0][0]).replace('same: ', 'same otherwise: ')}")
    for extra in result.v1[len(pairs) :]:
        lines.append(f"  {extra.name}: no TrainJob pod")
    for extra in result.trainjob[len(pairs) :]:
        lines.append(f"  {extra.name}: no v1 pod")
    return lines
