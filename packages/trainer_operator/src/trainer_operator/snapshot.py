"""The runtime snapshot (KEP-2599, Trainer v2.3.0's pkg/runtime/core/snapshot.go): on its first
reconcile a TrainJob copies its runtime, as YAML, into a ConfigMap it owns,
``<trainjob>-runtime-snapshot`` (data key ``runtime``), and from then on plans from that copy:
a platform team may edit or delete a runtime without changing, or breaking, the TrainJobs that
already use it. The ConfigMap goes with the TrainJob (garbage collection).
"""

from __future__ import annotations

from typing import Any

import yaml

from jobcontroller import LABEL_JOB_NAME
from trainer_operator.builder import owner_reference

__all__ = [
    "SNAPSHOT_KEY",
    "SNAPSHOT_SUFFIX",
    "SnapshotProblem",
    "read_snapshot",
    "snapshot_configmap",
    "snapshot_name",
]

Obj = dict[str, Any]

SNAPSHOT_SUFFIX = "-runtime-snapshot"
SNAPSHOT_KEY = "runtime"

#: libyaml's safe loader and dumper when PyYAML has them (ten times faster), else PyYAML's.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

#: Fields of a cached runtime not worth copying: the server's bookkeeping of who wrote what.
_DROPPED_META = ("managedFields",)


class SnapshotProblem(ValueError):
    """The snapshot ConfigMap cannot be used; the message says why."""


def snapshot_name(trainjob: Obj) -> str:
    return f"{trainjob['metadata']['name']}{SNAPSHOT_SUFFIX}"


def snapshot_configmap(trainjob: Obj, runtime: Obj) -> Obj:
    """The ConfigMap holding ``runtime`` (as the informer cached it) for ``trainjob``."""
    meta = trainjob["metadata"]
    copied = {key: value for key, value in runtime.items() if key != "status"}
    copied["metadata"] = {
        k: v for k, v in (runtime.get("metadata") or {}).items() if k not in _DROPPED_META
    }
    text = yaml.dump(
        copied, Dumper=_DUMPER, sort_keys=True, default_flow_style=False, width=2**31 - 1
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": snapshot_name(trainjob),
            "namespace": meta.get("namespace", ""),
            # Ours, not upstream's: the operator's ConfigMap informer selects on it.
            "labels": {LABEL_JOB_NAME: meta["name"]},
            "ownerReferences": [owner_reference(trainjob)],
        },
        "data": {SNAPSHOT_KEY: text},
    }


def read_snapshot(trainjob: Obj, configmap: Obj) -> Obj:
    """The runtime a TrainJob's snapshot holds, checked against the TrainJob's runtimeRef."""
    uid = (trainjob.get("metadata") or {}).get("uid")
    refs = (configmap.get("metadata") or {}).get("ownerReferences") or ()
    controller = next((r for r in refs if isinstance(r, dict) and r.get("controller")), None)
    if controller is None or controller.get("uid") != uid:
        raise SnapshotProblem(
            "invalid runtime snapshot: a snapshot configmap exists but is owned by another object"
        )
    text = (configmap.get("data") or {}).get(SNAPSHOT_KEY)
    if text is None:
        raise SnapshotProblem(
            f'invalid runtime snapshot: snapshot ConfigMap missing "{SNAPSHOT_KEY}" data key'
        )
    try:
        runtime = yaml.load(text, Loader=_LOADER)
    except yaml.YAMLError as exc:
        raise SnapshotProblem(
            f"invalid runtime snapshot: unable to unmarshal the snapshot: {exc}"
        ) from None
    if not isinstance(runtime, dict):
        raise SnapshotProblem(
            "invalid runtime snapshot: unable to unmarshal the snapshot: not an object"
        )
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    group, _, _ = str(runtime.get("apiVersion") or "").rpartition("/")
    kind = str(runtime.get("kind") or "")
    name = str((runtime.get("metadata") or {}).get("name") or "")
    want_kind, want_group = ref.get("kind"), ref.get("apiGroup")
    if (
        (want_kind is not None and kind != want_kind)
        or (want_group is not None and group != want_group)
        or name != ref.get("name")
    ):
        raise SnapshotProblem(
            "invalid runtime snapshot: the snapshot refers to the wrong runtime: expecting a "
            "runtime with name, api group and kind of "
            f'"{ref.get("name", "")}", "{want_group or "<any>"}", "{want_kind or "<any>"}" '
            "but found runtime with name, api group and kind of "
            f'"{name}", "{group}", "{kind}"'
        )
    return runtime
