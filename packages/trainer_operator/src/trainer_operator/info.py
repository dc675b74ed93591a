"""What a runtime says for one TrainJob, before the ML policy acts: Trainer v2.3.0's
``runtime.Info`` (pkg/runtime/runtime.go, core/trainingruntime.go's ``newRuntimeInfo``).

The runtime's JobSet template with the TrainJob's ``runtimePatches`` merged in (strategically,
in the patches' order; the replicated jobs keep the template's order), the labels and
annotations the JobSet will carry, and one :class:`PodSet` per replicated job: how many pods
(the trainer's from the ML policy's ``numNodes``, the others' from the Job's parallelism) and
the containers whose env, ports and mounts the policies add to. A replicated job is the
trainer's when its Job template wears ``trainer.kubeflow.org/trainjob-ancestor-step: trainer``.

Everything is plain JSON; nothing here reads a clock or the API. A runtime whose contents make
no sense raises :class:`RuntimeProblem`, which the planner reports on the TrainJob.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from msgspec import Struct, field

from jobcontroller import parse_quantity
from trainer_operator.smp import JOBSET_SPEC_KEYS, RESOURCES_KEYS, strategic_merge

__all__ = [
    "ANCESTOR_LABEL",
    "DATASET_INITIALIZER",
    "MODEL_INITIALIZER",
    "NODE",
    "TRAINER",
    "Container",
    "Info",
    "PodSet",
    "RuntimeProblem",
    "apply_env",
    "by_mount_path",
    "by_name",
    "by_port",
    "new_info",
    "upsert",
]

Obj = dict[str, Any]

ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
TRAINER = "trainer"
DATASET_INITIALIZER = "dataset-initializer"
MODEL_INITIALIZER = "model-initializer"
NODE = "node"
"""The trainer's replicated job and container name."""


class RuntimeProblem(ValueError):
    """The runtime (or its patches) cannot be turned into a JobSet; the message says why."""


class Container(Struct):
    """What the plugins may add to one container of a pod set (``runtime.Container``)."""

    name: str
    image: str = ""
    command: list[str] = field(default_factory=list)
    env: list[Obj] = field(default_factory=list)
    ports: list[Obj] = field(default_factory=list)
    volume_mounts: list[Obj] = field(default_factory=list)


class PodSet(Struct):
    """One replicated job's pods (``runtime.PodSet``)."""

    name: str
    ancestor: str | None
    count: int
    containers: list[Container] = field(default_factory=list)
    init_containers: list[Container] = field(default_factory=list)
    volumes: list[Obj] = field(default_factory=list)


class Info(Struct):
    labels: dict[str, str]
    annotations: dict[str, str]
    ml_policy: Obj | None
    """The runtime's ``mlPolicy`` (None: it has none: the plain ML policy)."""
    pod_group_policy: Obj | None
    spec: Obj
    """The JobSet spec: the template's, patched, with the trainer's resources merged."""
    pod_sets: list[PodSet]
    pod_labels: dict[str, str] = field(default_factory=dict)
    """Labels for every pod template (a pod group policy's)."""
    pod_annotations: dict[str, str] = field(default_factory=dict)
    """Annotations for every pod template (a pod group policy's)."""

    def pod_set_of_ancestor(self, ancestor: str) -> PodSet | None:
        return next((ps for ps in self.pod_sets if ps.ancestor == ancestor), None)

    def container_of_ancestor(self, ancestor: str, name: str) -> Container | None:
        ps = self.pod_set_of_ancestor(ancestor)
        return next((c for c in ps.containers if c.name == name), None) if ps else None

    def container_of_pod_set(self, pod_set: str, name: str) -> Container | None:
        """A container, else an init container, of the pod set named ``pod_set``."""
        ps = next((p for p in self.pod_sets if p.name == pod_set), None)
        if ps is None:
            return None
        return next((c for c in [*ps.containers, *ps.init_containers] if c.name == name), None)


def upsert(items: list[Obj], new: Iterable[Obj], same: Callable[[Obj, Obj], bool]) -> None:
    """Replace the item ``same`` as each new one in place, else append it (``apply.upsert``)."""
    for item in new:
        at = next((i for i, have in enumerate(items) if same(have, item)), None)
        if at is None:
            items.append(copy.deepcopy(item))
        else:
            items[at] = copy.deepcopy(item)


def by_name(a: Obj, b: Obj) -> bool:
    return a.get("name") == b.get("name")


def by_port(a: Obj, b: Obj) -> bool:
    """Ports are the same by number or by name (both unset names count as the same)."""
    return a.get("containerPort") == b.get("containerPort") or a.get("name") == b.get("name")


def by_mount_path(a: Obj, b: Obj) -> bool:
    return a.get("mountPath") == b.get("mountPath")


def apply_env(env: Iterable[Obj]) -> list[Obj]:
    """A TrainJob's env as upstream copies it into the JobSet (``apply.EnvVar``): the value,
    or the source from a field, a resource, a ConfigMap key or a Secret key."""
    out: list[Obj] = []
    for var in env:
        item: Obj = {"name": var.get("name", "")}
        source = var.get("valueFrom")
        if source is not None:
            copied: Obj = {}
            if "fieldRef" in source:
                copied["fieldRef"] = {"fieldPath": (source["fieldRef"] or {}).get("fieldPath", "")}
            if "resourceFieldRef" in source:
                ref = source["resourceFieldRef"] or {}
                copied["resourceFieldRef"] = {
                    k: ref[k] for k in ("containerName", "resource", "divisor") if k in ref
                }
            for kind in ("configMapKeyRef", "secretKeyRef"):
                if kind in source:
                    ref = source[kind] or {}
                    copied[kind] = {k: ref[k] for k in ("key", "name", "optional") if k in ref}
            item["valueFrom"] = copied
        elif var.get("value"):
            item["value"] = var["value"]
        out.append(item)
    return out


def _containers(items: Iterable[Obj]) -> list[Container]:
    return [
        Container(
            name=str(c.get("name", "")),
            image=str(c.get("image") or ""),
            command=list(c.get("command") or []),
            env=copy.deepcopy(list(c.get("env") or [])),
            ports=copy.deepcopy(list(c.get("ports") or [])),
            volume_mounts=copy.deepcopy(list(c.get("volumeMounts") or [])),
        )
        for c in items
    ]


def _patch_templates(trainjob_spec: Obj) -> list[Obj]:
    """The ``trainingRuntimeSpec.template`` of each runtime patch that has one, in order."""
    out = []
    for patch in trainjob_spec.get("runtimePatches") or ():
        template = ((patch or {}).get("trainingRuntimeSpec") or {}).get("template")
        if isinstance(template, dict):
            out.append(template)
    return out


def _patched_spec(spec: Obj, templates: list[Obj]) -> Obj:
    names = [str(r.get("name")) for r in spec.get("replicatedJobs") or ()]
    for template in templates:
        patch = template.get("spec")
        if isinstance(patch, dict):
            spec = strategic_merge(spec, patch, JOBSET_SPEC_KEYS)
    # Upstream sorts the merged list back into the template's order; a name the template
    # lacks sorts as its first one (Go's zero value for a missing map key).
    jobs = spec.get("replicatedJobs")
    if isinstance(jobs, list):
        order = {name: i for i, name in enumerate(names)}
        spec["replicatedJobs"] = sorted(jobs, key=lambda r: order.get(str(r.get("name")), 0))
    return spec


def _merge_resources(container: Obj, per_node: Obj) -> None:
    """``resourcesPerNode`` over the container's limits and requests (claims by name); the
    container then has the merged limits and requests only, as upstream's apply config."""
    have = container.get("resources") or {}
    base = {k: have[k] for k in ("limits", "requests") if have.get(k) is not None}
    merged = strategic_merge(base, per_node, RESOURCES_KEYS)
    resources = {k: merged[k] for k in ("limits", "requests") if merged.get(k) is not None}
    for values in resources.values():
        if not isinstance(values, dict):
            raise RuntimeProblem(f"resourcesPerNode: {values!r} is not a resource list")
        for name, quantity in values.items():
            try:
                parse_quantity(quantity)
            except (ValueError, TypeError, ZeroDivisionError):
                raise RuntimeProblem(
                    f"resourcesPerNode: quantities must match the regular expression "
                    f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' ({name}: {quantity!r})"
                ) from None
    container["resources"] = resources


def new_info(trainjob: Obj, runtime_spec: Obj) -> Info:
    """The :class:`Info` of ``trainjob`` on a runtime whose ``spec`` is ``runtime_spec``."""
    spec_of_job: Obj = trainjob.get("spec") or {}
    template = runtime_spec.get("template") or {}
    if not isinstance(template, dict) or not isinstance(template.get("spec") or {}, dict):
        raise RuntimeProblem("unsupported runtimeTemplateSpec")
    meta = template.get("metadata") or {}
    labels = dict(meta.get("labels") or {})
    annotations = dict(meta.get("annotations") or {})
    patches = _patch_templates(spec_of_job)
    for patch in patches:
        patch_meta = patch.get("metadata") or {}
        labels.update(patch_meta.get("labels") or {})
        annotations.update(patch_meta.get("annotations") or {})
    spec = _patched_spec(copy.deepcopy(template.get("spec") or {}), patches)
    ml_policy = runtime_spec.get("mlPolicy")
    ml_policy = ml_policy if isinstance(ml_policy, dict) else None
    trainer: Obj = spec_of_job.get("trainer") or {}
    per_node = trainer.get("resourcesPerNode")
    mpi = (ml_policy or {}).get("mpi") or {}
    pod_sets: list[PodSet] = []
    for rjob in spec.get("replicatedJobs") or ():
        job_template = rjob.setdefault("template", {})
        job_spec = job_template.setdefault("spec", {})
        count = job_spec.get("parallelism")
        count = 1 if count is None else int(count)
        ancestor = ((job_template.get("metadata") or {}).get("labels") or {}).get(ANCESTOR_LABEL)
        if ancestor == TRAINER and ml_policy is not None:
            count = int(ml_policy.get("numNodes") or 1)
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        launcher_as_node = bool(mpi.get("runLauncherAsNode")) and rjob.get("name") == NODE
        if isinstance(per_node, dict) and (
            (ancestor == TRAINER and ml_policy is not None) or launcher_as_node
        ):
            node = next(
                (c for c in pod_spec.get("containers") or () if c.get("name") == NODE), None
            )
            if node is not None:
                _merge_resources(node, per_node)
        pod_sets.append(
            PodSet(
                name=str(rjob.get("name", "")),
                ancestor=ancestor,
                count=max(count, 1),
                containers=_containers(pod_spec.get("containers") or ()),
                init_containers=_containers(pod_spec.get("initContainers") or ()),
                volumes=copy.deepcopy(list(pod_spec.get("volumes") or [])),
            )
        )
    return Info(
        labels=labels,
        annotations=annotations,
        ml_policy=ml_policy,
        pod_group_policy=runtime_spec.get("podGroupPolicy"),
        spec=spec,
        pod_sets=pod_sets,
    )
