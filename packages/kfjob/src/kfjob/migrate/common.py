"""The mapping the single-pod-set kinds share (PyTorchJob, JAXJob, XGBoostJob): their replicas
become the nodes of one ``node`` replicated job of a torch, jax or xgboost runtime.

Rules (docs/migrating.md says them for users):

- nodes: the sum of the replica types' replicas (Master + Worker) is ``trainer.numNodes``; the
  first type's template (Master's, else Worker's) is every node's. Where another type's
  template differs, each differing field is a warning: one TrainJob node template for all.
- the framework container (``pytorch``, ``jax``, ``xgboost``; else the first) gives the
  trainer's image, command, args, env and resources (``resourcesPerNode``); it is the
  runtime's ``node`` container.
- the rest of the template: labels, annotations and the pod fields a runtime patch may set go
  into one ``runtimePatches`` entry on the shipped runtime; anything else (more containers,
  the container's ports, pull policy, probes; other pod fields) into a TrainingRuntime of its
  own: a copy of the shipped runtime whose ``node`` template is the v1 template.
- the v1 env: the variables the v1 operator gave each pod (MASTER_ADDR, RANK, ...), with the
  TrainJob's host names and the node's index as rank, so a script written for v1 finds them
  (``--no-v1-env`` leaves them out; the runtime's own variables are there regardless).
- runPolicy: suspend, activeDeadlineSeconds and a MultiKueue managedBy carry over; what a
  TrainJob has no field for is a warning. The job's labels and annotations carry over.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kfjob.migrate.base import (
    COMPLETION_INDEX,
    GROUP,
    NODE,
    TRAINER_API_VERSION,
    Findings,
    Migration,
    carried_metadata,
    differences,
    runtime_patch,
    split_template,
)
from kfjob.migrate.runtimes import shipped_runtime

__all__ = ["Context", "NodeSet", "migrate_node_set", "rank_env", "trainjob_host"]

Obj = dict[str, Any]

MULTIKUEUE = "kueue.x-k8s.io/multikueue"


@dataclass(slots=True)
class Context:
    """One v1 job being migrated."""

    source: Obj
    """As given."""
    defaulted: Obj
    """As the v1 operator defaults it (replicas, restart policies, ports filled in)."""
    findings: Findings
    v1_env: bool = True

    @property
    def name(self) -> str:
        return str(self.source["metadata"]["name"])

    @property
    def namespace(self) -> str | None:
        ns = (self.source.get("metadata") or {}).get("namespace")
        return str(ns) if ns else None


def trainjob_host(name: str, index: int, rjob: str = NODE) -> str:
    """The host name of pod ``index`` of a TrainJob's (JobSet's) ``rjob`` replicated job."""
    return f"{name}-{rjob}-0-{index}.{name}"


def rank_env(name: str) -> Obj:
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}}}


V1Env = Callable[[Context, int, int], list[Obj]]
"""(job, node count, framework port) -> the v1 operator's variables, as TrainJob env."""


@dataclass(frozen=True, slots=True)
class NodeSet:
    """How one single-pod-set kind maps (module docstring)."""

    specs_key: str
    """``pytorchReplicaSpecs``, ..."""
    replica_types: tuple[str, ...]
    """In rank order: the first present one's template is every node's."""
    container: str
    port_name: str
    default_port: int
    runtime: str
    """The shipped ClusterTrainingRuntime."""
    v1_env: V1Env
    num_proc_per_node: Callable[[Context], int | None] = lambda ctx: None
    kind_warnings: Callable[[Context], None] = lambda ctx: None


def _strip_port(template: Obj, *, container: str, port_name: str) -> int | None:
    """Take the framework's named port off its container (the v1 env carries its number;
    a TrainJob's pods need no declared port to reach each other); its number, if there."""
    for c in (template.get("spec") or {}).get("containers") or ():
        if c.get("name") != container:
            continue
        ports = c.get("ports") or []
        named = [p for p in ports if p.get("name") == port_name]
        if not named:
            return None
        rest = [p for p in ports if p.get("name") != port_name]
        if rest:
            c["ports"] = rest
        else:
            c.pop("ports", None)
        return int(named[0].get("containerPort") or 0) or None
    return None


def _written_port(ctx: Context, ns: NodeSet, rtype: str) -> int | None:
    """The framework port the job's own template names (the defaulted one always has one)."""
    spec = ((ctx.source.get("spec") or {}).get(ns.specs_key) or {}).get(rtype) or {}
    template = copy.deepcopy(spec.get("template") or {})
    return _strip_port(template, container=ns.container, port_name=ns.port_name)


def _restart(ctx: Context, path: str, policy: str | None, template: Obj) -> bool:
    """Carry a replica's restartPolicy; True when only a runtime can (Never)."""
    # A JobSet's pods restart OnFailure unless their template says otherwise (its webhook's
    # default), which is the v1 OnFailure.
    if policy in (None, "OnFailure"):
        return False
    if policy == "Never":
        template.setdefault("spec", {})["restartPolicy"] = "Never"
        return True
    ctx.findings.warn(
        path,
        f"{policy} has no TrainJob equivalent: the pods restart OnFailure (any exit code), "
        "as many times as the Job's backoffLimit allows",
    )
    return False


def run_policy(ctx: Context, kind_default_managed_by: str) -> Obj:
    """The TrainJob spec fields of the v1 runPolicy; a warning for each field it drops."""
    rp = (ctx.source.get("spec") or {}).get("runPolicy") or {}
    out: Obj = {}
    if rp.get("suspend") is not None:
        out["suspend"] = bool(rp["suspend"])
    if rp.get("activeDeadlineSeconds") is not None:
        out["activeDeadlineSeconds"] = int(rp["activeDeadlineSeconds"])
    managed = rp.get("managedBy")
    if managed == MULTIKUEUE:
        out["managedBy"] = MULTIKUEUE
    elif managed not in (None, kind_default_managed_by):
        ctx.findings.warn(
            "spec.runPolicy.managedBy",
            f"{managed!r} is not carried: a TrainJob is managed by its controller or MultiKueue",
        )
    why = {
        "backoffLimit": "failures are retried per the Job's backoffLimit and the JobSet's "
        "failurePolicy (a TrainingRuntime's), not counted job-wide",
        "ttlSecondsAfterFinished": "a finished TrainJob stays until deleted",
        "schedulingPolicy": "gang scheduling is a runtime's podGroupPolicy; a Kueue queue is "
        "the kueue.x-k8s.io/queue-name label (the job's labels carry over)",
        "restartScope": "a TrainJob restarts pods as its Jobs do",
    }
    for key, reason in why.items():
        if rp.get(key) is not None:
            ctx.findings.warn(f"spec.runPolicy.{key}", f"not carried: {reason}")
    if rp.get("cleanPodPolicy") not in (None, "None"):
        ctx.findings.warn(
            "spec.runPolicy.cleanPodPolicy",
            f"{rp['cleanPodPolicy']} is not carried: a finished TrainJob's pods are left "
            "as its JobSet leaves them",
        )
    return out


def _merge_env(ctx: Context, env: list[Obj], extra: Sequence[Obj]) -> list[Obj]:
    have = {e.get("name") for e in env}
    added = [e for e in extra if e["name"] not in have]
    if added:
        ctx.findings.note(
            "env",
            "the v1 operator's variables are in trainer.env with the TrainJob's host names: "
            + ", ".join(e["name"] for e in added),
        )
    return [*env, *added]


def new_runtime(ctx: Context, *, base: Obj, name: str, template: Obj) -> Obj:
    """A TrainingRuntime: ``base`` with its ``node`` replicated job's pod template replaced by
    ``template`` (the ancestor label and everything else of the base kept)."""
    runtime = copy.deepcopy(base)
    runtime["kind"] = "TrainingRuntime"
    meta: Obj = {"name": name}
    if ctx.namespace:
        meta["namespace"] = ctx.namespace
    labels = {
        k: v
        for k, v in ((base.get("metadata") or {}).get("labels") or {}).items()
        if k != "trainer.kubeflow.org/webhook-validation"  # ours is not a vetted runtime
    }
    if labels:
        meta["labels"] = labels
    runtime["metadata"] = meta
    for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
        if rjob.get("name") == NODE:
            rjob.setdefault("template", {}).setdefault("spec", {})["template"] = template
    return runtime


def migrate_node_set(ctx: Context, kind: str, ns: NodeSet, *, managed_by: str) -> Migration:
    f = ctx.findings
    ns.kind_warnings(ctx)
    specs: Mapping[str, Obj] = (ctx.defaulted.get("spec") or {}).get(ns.specs_key) or {}
    types = [t for t in ns.replica_types if t in specs]
    types += sorted(t for t in specs if t not in ns.replica_types)
    num_nodes = sum(int(specs[t].get("replicas") or 0) for t in types)
    first = types[0]
    base_path = f"spec.{ns.specs_key}"
    templates = {t: copy.deepcopy(specs[t].get("template") or {}) for t in types}
    ports = {
        t: _strip_port(templates[t], container=ns.container, port_name=ns.port_name) for t in types
    }
    for t in types[1:]:
        for diff in differences(templates[t], templates[first]):
            f.warn(
                f"{base_path}.{t}.template.{diff}",
                f"differs from {first}'s; every TrainJob node runs {first}'s template",
            )
        if specs[t].get("restartPolicy") != specs[first].get("restartPolicy"):
            f.warn(
                f"{base_path}.{t}.restartPolicy",
                f"differs from {first}'s; every TrainJob node has {first}'s",
            )
    split = split_template(
        templates[first], container=ns.container, path=f"{base_path}.{first}.template"
    )
    if _restart(
        ctx, f"{base_path}.{first}.restartPolicy", specs[first].get("restartPolicy"), split.template
    ):
        split.runtime_only.append(f"{base_path}.{first}.restartPolicy")

    trainer: Obj = {"numNodes": num_nodes}
    for key in ("image", "command", "args", "env"):
        if key in split.trainer:
            trainer[key] = split.trainer[key]
    if "resources" in split.trainer:
        trainer["resourcesPerNode"] = split.trainer["resources"]
    proc = ns.num_proc_per_node(ctx)
    if proc is not None:
        trainer["numProcPerNode"] = proc
    if ctx.v1_env:
        port = ports[first] or ns.default_port
        env = _merge_env(ctx, list(trainer.get("env") or []), ns.v1_env(ctx, num_nodes, port))
        if env:
            trainer["env"] = env
    elif _written_port(ctx, ns, first) is not None:
        f.warn(
            f"{base_path}.{first}.template.spec.containers[{ns.container}].ports[{ns.port_name}]",
            f"port {ports[first]} is not carried (--no-v1-env): the runtime's port is 29500",
        )

    spec: Obj = {}
    runtime: Obj | None = None
    if split.runtime_only:
        rt_name = f"{ctx.name}-runtime"
        node_tpl = copy.deepcopy(split.template)
        if "image" in split.trainer:
            node_tpl["spec"]["containers"][0]["image"] = split.trainer["image"]
        runtime = new_runtime(
            ctx, base=shipped_runtime(ns.runtime), name=rt_name, template=node_tpl
        )
        runtime["spec"].setdefault("mlPolicy", {})["numNodes"] = num_nodes
        spec["runtimeRef"] = {"apiGroup": GROUP, "kind": "TrainingRuntime", "name": rt_name}
        f.note(
            "template",
            f"TrainingRuntime {rt_name} (a copy of {ns.runtime}) carries what a runtime patch "
            f"cannot: {', '.join(split.runtime_only)}",
        )
    else:
        spec["runtimeRef"] = {
            "apiGroup": GROUP,
            "kind": "ClusterTrainingRuntime",
            "name": ns.runtime,
        }
    spec["trainer"] = trainer
    if runtime is None:
        patch = runtime_patch(split.template)
        rjob = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
        if rjob["template"]["spec"]["template"]:
            spec["runtimePatches"] = [patch]
    spec.update(run_policy(ctx, managed_by))
    return Migration(
        kind=kind,
        name=ctx.name,
        source=ctx.source,
        trainjob=trainjob_body(ctx, spec),
        runtime=runtime,
        warnings=tuple(f.warnings),
        notes=tuple(f.notes),
    )


def trainjob_body(ctx: Context, spec: Obj) -> Obj:
    meta: Obj = {"name": ctx.name}
    if ctx.namespace:
        meta["namespace"] = ctx.namespace
    meta.update(carried_metadata(ctx.source.get("metadata") or {}))
    return {"apiVersion": TRAINER_API_VERSION, "kind": "TrainJob", "metadata": meta, "spec": spec}
