"""What every kind's migration shares: the result, the warnings, and the split of a v1 pod
template into what a TrainJob's ``trainer`` carries, what a runtime patch can carry, and what
only a TrainingRuntime of its own can.

A TrainJob's pods are its runtime's ``node`` template with the TrainJob's ``trainer`` fields
(image, command, args, env, resourcesPerNode) put into the ``node`` container, and its
``runtimePatches`` merged in. A runtime patch may set only pod labels and annotations, a short
list of pod fields (:data:`PATCHABLE_POD_FIELDS`) and the volume mounts and security context of
an existing container. Anything else a v1 template says (another container, the main
container's ports or pull policy, a pod field such as ``hostNetwork``) needs a TrainingRuntime
whose template says it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ANCESTOR_LABEL",
    "COMPLETION_INDEX",
    "GROUP",
    "NODE",
    "PATCH_MANAGER",
    "TRAINER_API_VERSION",
    "Findings",
    "MigrateError",
    "Migration",
    "Split",
    "split_template",
]

Obj = dict[str, Any]

TRAINER_API_VERSION = "trainer.kubeflow.org/v1alpha1"
GROUP = "trainer.kubeflow.org"
NODE = "node"
"""The trainer's replicated job and container in every runtime."""
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"
"""A JobSet pod's index in its Job: the node's rank (what the ML policies read too)."""
PATCH_MANAGER = "kubeflow.org/kfjob-migrate"
"""The ``manager`` of the runtime patch a migration writes (a domain-prefixed path)."""

TRAINER_FIELDS = ("image", "command", "args", "env", "resources")
PATCHABLE_POD_FIELDS = frozenset(
    {
        "serviceAccountName",
        "volumes",
        "imagePullSecrets",
        "securityContext",
        "nodeSelector",
        "affinity",
        "tolerations",
        "schedulingGates",
        "terminationGracePeriodSeconds",
    }
)
PATCHABLE_CONTAINER_FIELDS = frozenset({"volumeMounts", "securityContext"})
#: Annotations that describe how an object was applied, not what it asks for.
_NOT_CARRIED_ANNOTATIONS = ("kubectl.kubernetes.io/last-applied-configuration",)


class MigrateError(ValueError):
    """The document cannot be migrated (not a job kfjob migrates, or one admission refuses)."""


@dataclass(slots=True)
class Findings:
    """Warnings (something the v1 job asked for that the TrainJob does differently or not at
    all) and notes (how something was carried), each prefixed by the v1 field it is about."""

    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{path}: {message}")

    def note(self, path: str, message: str) -> None:
        self.notes.append(f"{path}: {message}")


@dataclass(frozen=True, slots=True)
class Migration:
    """One v1 job's Trainer v2 equivalent."""

    kind: str
    """The v1 kind (PyTorchJob, ...)."""
    name: str
    source: Obj
    """The v1 job as given."""
    trainjob: Obj
    runtime: Obj | None
    """The TrainingRuntime to create first, None when the TrainJob runs on a shipped one."""
    warnings: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()

    @property
    def runtime_ref(self) -> str:
        ref = self.trainjob["spec"]["runtimeRef"]
        return f"{ref.get('kind', 'ClusterTrainingRuntime')} {ref['name']}"

    def documents(self) -> list[Obj]:
        """What to apply, in order: the runtime (if any), then the TrainJob."""
        return [*([self.runtime] if self.runtime is not None else []), self.trainjob]


@dataclass(slots=True)
class Split:
    """A v1 pod template, taken apart for a TrainJob (module docstring)."""

    trainer: Obj
    """image, command, args, env and resources of the main container (the non-empty ones)."""
    template: Obj
    """The rest, as a runtime's ``node`` pod template: the main container renamed ``node``."""
    runtime_only: list[str]
    """Fields of ``template`` no runtime patch can carry (v1 paths)."""


def split_template(template: Mapping[str, Any], *, container: str | None, path: str) -> Split:
    """Split ``template`` (at v1 field path ``path``); ``container`` names the framework's
    container (the first one when it is None or absent, as the v1 operators fall back)."""
    tpl: Obj = copy.deepcopy(dict(template))
    spec: Obj = tpl.setdefault("spec", {})
    containers: list[Obj] = list(spec.get("containers") or [])
    if not containers:
        raise MigrateError(f"{path}.spec.containers: Required value: no container to run")
    main = next((c for c in containers if c.get("name") == container), containers[0])
    trainer = {k: main[k] for k in TRAINER_FIELDS if main.get(k)}
    node: Obj = {"name": NODE}
    node.update({k: v for k, v in main.items() if k not in (*TRAINER_FIELDS, "name")})
    cpath = f"{path}.spec.containers[{main.get('name')}]"
    runtime_only = [f"{cpath}.{k}" for k in node if k not in (*PATCHABLE_CONTAINER_FIELDS, "name")]
    others = [c for c in containers if c is not main]
    runtime_only += [f"{path}.spec.containers[{c.get('name')}]" for c in others]
    spec["containers"] = [node, *others]
    spec.pop("restartPolicy", None)  # the v1 operators set it from the replica's restartPolicy
    runtime_only += [
        f"{path}.spec.{k}" for k in spec if k != "containers" and k not in PATCHABLE_POD_FIELDS
    ]
    meta = tpl.get("metadata") or {}
    tpl["metadata"] = {k: meta[k] for k in ("labels", "annotations") if meta.get(k)}
    if not tpl["metadata"]:
        del tpl["metadata"]
    return Split(trainer=trainer, template=tpl, runtime_only=runtime_only)


def carried_metadata(meta: Mapping[str, Any]) -> Obj:
    """The v1 job's labels and annotations, for the TrainJob's metadata."""
    out: Obj = {}
    labels = dict(meta.get("labels") or {})
    annotations = {
        k: v
        for k, v in (meta.get("annotations") or {}).items()
        if k not in _NOT_CARRIED_ANNOTATIONS
    }
    if labels:
        out["labels"] = labels
    if annotations:
        out["annotations"] = annotations
    return out


def runtime_patch(template: Mapping[str, Any]) -> Obj:
    """The runtime patch putting ``template`` (a :class:`Split`'s, patchable fields only) on the
    runtime's ``node`` pods."""
    pod: Obj = {}
    if template.get("metadata"):
        pod["metadata"] = copy.deepcopy(template["metadata"])
    spec = {k: copy.deepcopy(v) for k, v in (template.get("spec") or {}).items()}
    containers = [c for c in spec.pop("containers", []) if len(c) > 1]
    if containers:
        spec["containers"] = containers
    if spec:
        pod["spec"] = spec
    rjob = {"name": NODE, "template": {"spec": {"template": pod}}}
    return {
        "manager": PATCH_MANAGER,
        "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [rjob]}}},
    }


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """The field paths where ``a`` and ``b`` differ (lists item by item)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted({*a, *b}, key=str):
            out += differences(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        out = []
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            name = x.get("name") if isinstance(x, dict) and x.get("name") else i
            out += differences(x, y, f"{path}[{name}]")
        return out
    return [] if a == b else [path]
