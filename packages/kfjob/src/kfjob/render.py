"""Render, offline, the objects an operator creates for a job: the operator's own planner.

:func:`render_job` runs :func:`jobcontroller.core.planner.plan` (the function the operator's
reconcile calls) with the controller the operator builds from its default flags, on an empty
:class:`~jobcontroller.core.types.Observed`. It then plays the operator's next reconciles the
way the informers would show them: every object created so far is in the caches and the job
carries the status the operator wrote, until a pass creates nothing new. That is what the
operator creates before any pod has run (MPI's launcher Job, for one, is planned only once its
hostfile ConfigMap and SSH Secret exist). Each creation goes through the controller's
``materialize`` as the executor sends it (MPI's SSH key pair), and Secret values are redacted.

Before planning, the job passes the checks admission makes: the model's schema (pydantic, the
same constraints as the CRD's structural schema for everything but the pod template) and the
framework's ``validate`` (the same rules as the CRD's CEL), all of them, including those the
operator tolerates on jobs stored before the rules existed, since admission refuses those.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from jobcontroller import (
    POD,
    SERVICE,
    CreateObject,
    DeleteObject,
    Event,
    JobController,
    Obj,
    Observed,
    PatchObject,
    plan,
)
from jobcontroller.api import JobConditionType, JobStatus
from kfjob.kinds import JobKind, UnknownKind, kind_of_document

__all__ = [
    "PLACEHOLDER_UID",
    "REDACTED",
    "RenderError",
    "Rendered",
    "load_documents",
    "pod_env",
    "pod_rows",
    "render_job",
    "render_text",
    "to_yaml",
]

#: The job's uid in the ownerReferences of rendered objects: the API server assigns the real
#: one when the job is created.
PLACEHOLDER_UID = "00000000-0000-0000-0000-000000000000"
REDACTED = "<redacted>"

#: A bound on the reconciles played (a 10,000-pod job takes 200 at 100 writes each).
_MAX_PASSES = 10_000


class RenderError(ValueError):
    """The job would be refused (admission or the operator's validation) or is not a job.

    ``errors``: each refusal as ``field.path: message`` (admission's words); ``line``: the
    1-based line of a YAML syntax error. ``kfjob ui`` shows them beside the lines they name.
    """

    def __init__(self, message: str, *, errors: Sequence[str] = (), line: int | None = None):
        super().__init__(message)
        self.errors = tuple(errors)
        self.line = line


@dataclass(frozen=True, slots=True)
class Rendered:
    """What the operator creates for one job."""

    kind: JobKind
    name: str
    namespace: str
    objects: tuple[Obj, ...]
    """Bodies as the operator sends them, in its order; Secret values redacted."""
    events: tuple[Event, ...] = ()
    """Events the operator records on the way (warnings about the spec, for one)."""
    notes: tuple[str, ...] = ()
    """Why some objects are not there yet (suspended, managed elsewhere, waiting for pods)."""
    passes: int = 1
    status: JobStatus = field(default_factory=JobStatus)

    @property
    def pods(self) -> list[Obj]:
        return [o for o in self.objects if o.get("kind") == POD]


def load_documents(text: str, *, source: str = "<stdin>") -> list[Obj]:
    """The non-empty YAML documents of ``text``; each must be a mapping."""
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise RenderError(f"{source}: not valid YAML: {exc}", line=line) from exc
    out: list[Obj] = []
    for i, doc in enumerate(docs):
        if not isinstance(doc, dict):
            raise RenderError(f"{source}: document {i + 1} is not a mapping")
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            out += [item for item in doc["items"] if isinstance(item, dict)]
        else:
            out.append(doc)
    return out


def render_text(
    text: str,
    *,
    namespace: str = "default",
    operator_args: Sequence[str] = (),
    source: str = "<stdin>",
) -> list[Rendered]:
    """Render every job in a YAML stream (several documents, or a ``List``)."""
    return [
        render_job(doc, namespace=namespace, operator_args=operator_args)
        for doc in load_documents(text, source=source)
    ]


def _field_path(loc: Iterable[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


def _schema_errors(exc: ValidationError) -> list[str]:
    return [f"{_field_path(e['loc'])}: {e['msg']}" for e in exc.errors()]


def _admission_errors(kind: JobKind, controller: JobController[Any], raw: Obj) -> list[str]:
    """What admission would refuse, in the operator's words (see the module docstring)."""
    meta = raw.get("metadata") or {}
    if not meta.get("name"):
        return ["metadata.name: Required value: name or generateName is required"]
    try:
        job = controller.set_defaults(kind.model.parse(raw))
    except ValidationError as exc:
        return _schema_errors(exc)
    return controller.validate(job)


def render_job(
    doc: Mapping[str, Any],
    *,
    namespace: str = "default",
    operator_args: Sequence[str] = (),
    now: dt.datetime | None = None,
    redact: bool = True,
    controller: JobController[Any] | None = None,
) -> Rendered:
    """The objects the operator creates for ``doc`` before any pod runs (module docstring).

    ``namespace`` applies when the manifest names none (as ``kubectl apply -n`` does);
    ``operator_args`` are the operator's ``run`` flags (``--gang-scheduler-name=volcano``).
    Raises :class:`RenderError` for a job admission or the operator would refuse.
    """
    try:
        kind = kind_of_document(dict(doc))
    except UnknownKind as exc:
        raise RenderError(str(exc)) from exc
    controller = controller or kind.controller(operator_args)
    raw: Obj = copy.deepcopy(dict(doc))
    meta = raw.setdefault("metadata", {})
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = f"{meta['generateName']}xxxxx"
    meta.setdefault("namespace", namespace)
    meta["uid"] = PLACEHOLDER_UID
    name = str(meta.get("name") or "")
    errors = _admission_errors(kind, controller, raw)
    if errors:
        raise RenderError(
            f"{kind.kind} {name} would be refused: {'; '.join(errors)}", errors=errors
        )
    when = now or dt.datetime.now(dt.UTC)
    world = _World()
    created: list[Obj] = []
    events: list[Event] = []
    notes: list[str] = []
    passes = 0
    status = JobStatus()
    for passes in range(1, _MAX_PASSES + 1):  # noqa: B007 (the count is reported)
        result = plan(controller, raw, world.observed(), now=when, config=controller.config)
        events += result.events
        if isinstance(result.status, JobStatus):  # a v1 kind's planner plans a JobStatus
            status = result.status
            raw["status"] = status.to_dict()
            failed = status.condition(JobConditionType.FAILED)
            if failed is not None and failed.status == "True":
                raise RenderError(failed.message or f"{kind.kind} {name} fails")
        new = [a for a in result.actions if isinstance(a, CreateObject)]
        for action in result.actions:
            if isinstance(action, PatchObject) and action.kind != kind.kind:
                world.patch(action)
                _patch_rendered(created, action)
            elif isinstance(action, DeleteObject):  # nothing of ours is there to delete
                raise RenderError(f"unexpected deletion planned: {action}")
        if not new:
            break
        for action in new:
            body = copy.deepcopy(controller.materialize(action).body)
            created.append(_redacted(body) if redact else body)
            world.store(action.kind, body)
    if not created:
        notes.append(_why_nothing(raw, kind))
    notes += _waiting_notes(kind, raw, created)
    return Rendered(
        kind=kind,
        name=name,
        namespace=str(meta["namespace"]),
        objects=tuple(created),
        events=tuple(events),
        notes=tuple(notes),
        passes=passes,
        status=status,
    )


class _World:
    """The informer caches as the next reconcile would see them: what was created so far."""

    def __init__(self) -> None:
        self.by_kind: dict[str, list[Obj]] = {}
        self._count = 0

    def store(self, kind: str, body: Obj) -> None:
        self._count += 1
        stored = copy.deepcopy(body)
        stored.setdefault("metadata", {})["uid"] = f"rendered-{self._count}"
        self.by_kind.setdefault(kind, []).append(stored)

    def patch(self, action: PatchObject) -> None:
        for obj in self.by_kind.get(action.kind, ()):
            if (obj.get("metadata") or {}).get("name") == action.name:
                _merge(obj, action.patch)

    def observed(self) -> Observed:
        objs = self.by_kind

        def lookup(kind: str, name: str) -> Obj | None:
            return next(
                (o for o in objs.get(kind, ()) if o["metadata"].get("name") == name),
                None,
            )

        def controlled_by(kind: str, uid: str) -> tuple[Obj, ...]:
            return ()  # nothing rendered has children (no launcher pod runs offline)

        return Observed(
            pods=tuple(objs.get(POD, ())),
            services=tuple(objs.get(SERVICE, ())),
            owned={k: tuple(v) for k, v in objs.items() if k not in (POD, SERVICE)},
            lookup=lookup,
            controlled_by=controlled_by,
        )


def _merge(target: Obj, patch: Mapping[str, Any]) -> None:
    """RFC 7386 merge patch, in place."""
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _patch_rendered(created: list[Obj], action: PatchObject) -> None:
    for obj in created:
        if obj.get("kind") == action.kind and obj["metadata"].get("name") == action.name:
            _merge(obj, action.patch)


def _redacted(body: Obj) -> Obj:
    if body.get("kind") != "Secret":
        return body
    for key in ("data", "stringData"):
        values = body.get(key)
        if isinstance(values, dict):
            body[key] = dict.fromkeys(values, REDACTED)
    return body


def _why_nothing(raw: Obj, kind: JobKind) -> str:
    run_policy = (raw.get("spec") or {}).get("runPolicy") or {}
    managed_by = run_policy.get("managedBy")
    if managed_by and managed_by != kind.model.MANAGED_BY_SELF:
        return (
            f"runPolicy.managedBy is {managed_by!r}: {kind.operator} leaves this job to that "
            "controller and creates nothing"
        )
    if run_policy.get("suspend"):
        return "the job is suspended: its pods are created when it is resumed"
    return "the operator creates nothing for this job"


def _waiting_notes(kind: JobKind, raw: Obj, created: Sequence[Obj]) -> list[str]:
    spec = raw.get("spec") or {}
    kinds = {o.get("kind") for o in created}
    if "PodGroup" in kinds and POD not in kinds:
        return [
            "the pods are created once the gang scheduler admits the PodGroup "
            "(Volcano holds pod creation until then)"
        ]
    if kind.kind != "MPIJob" or any(o.get("kind") == "Job" for o in created):
        return []
    if spec.get("launcherCreationPolicy") == "WaitForWorkersReady":
        return [
            "the launcher Job is created once every worker is ready "
            "(launcherCreationPolicy: WaitForWorkersReady)"
        ]
    return []


# ------------------------------------------------------------------------------ views


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (hostfiles, scripts) as ``|`` blocks."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def to_yaml(objects: Iterable[Obj]) -> str:
    """YAML documents, ``---`` separated, keys in the order the operator built them."""
    return "".join(
        "---\n" + yaml.dump(o, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
        for o in objects
    )


def _labels(pod: Obj) -> dict[str, str]:
    return dict((pod.get("metadata") or {}).get("labels") or {})


def pod_env(pod: Obj) -> dict[str, dict[str, str]]:
    """Container name -> env (name -> value, or the source of a valueFrom), init containers
    first; JSON values (TF_CONFIG) pretty-printed."""
    spec = pod.get("spec") or {}
    out: dict[str, dict[str, str]] = {}
    for group in ("initContainers", "containers"):
        for c in spec.get(group) or ():
            env: dict[str, str] = {}
            for e in c.get("env") or ():
                if "value" in e:
                    env[str(e["name"])] = _pretty(str(e["value"]))
                elif "valueFrom" in e:
                    env[str(e["name"])] = f"(from {json.dumps(e['valueFrom'], sort_keys=True)})"
                else:
                    env[str(e["name"])] = ""
            label = f"{c.get('name')} (init)" if group == "initContainers" else str(c.get("name"))
            out[label] = env
    return out


def _pretty(value: str) -> str:
    if value[:1] in "{[":
        try:
            return json.dumps(json.loads(value), indent=2)
        except ValueError:
            return value
    return value


@dataclass(frozen=True, slots=True)
class PodRow:
    """One line of ``kfjob render --table``."""

    pod: str
    replica_type: str
    index: str
    role: str
    ports: str
    command: str


def pod_rows(objects: Iterable[Obj]) -> list[PodRow]:
    """The pods (and MPI's launcher Job's pod template) with their roles, ports, commands."""
    rows: list[PodRow] = []
    for obj in objects:
        if obj.get("kind") == POD:
            rows.append(_row(str(obj["metadata"]["name"]), obj, obj.get("spec") or {}))
        elif obj.get("kind") == "Job":
            template = (obj.get("spec") or {}).get("template") or {}
            rows.append(
                _row(f"{obj['metadata']['name']} (Job)", template, template.get("spec") or {})
            )
    return rows


def _row(name: str, obj: Obj, spec: Obj) -> PodRow:
    labels = _labels(obj)
    ports: list[str] = []
    commands: list[str] = []
    for c in spec.get("containers") or ():
        ports += [f"{p.get('name') or '-'}:{p.get('containerPort')}" for p in c.get("ports") or ()]
        argv = [*(c.get("command") or ()), *(c.get("args") or ())]
        if argv:
            commands.append(" ".join(str(a) for a in argv))
    return PodRow(
        pod=name,
        replica_type=labels.get("training.kubeflow.org/replica-type", ""),
        index=labels.get("training.kubeflow.org/replica-index", ""),
        role=labels.get("training.kubeflow.org/job-role", ""),
        ports=", ".join(ports),
        command=" | ".join(commands) or "(image default)",
    )
