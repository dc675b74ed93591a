"""Strategic merge of JSON objects, for the two places Trainer v2.3.0 uses one: a TrainJob's
``runtimePatches`` over its runtime's JobSet spec, and ``resourcesPerNode`` over the trainer
container's resources.

Kubernetes' strategic merge patch: mappings merge key by key (``null`` deletes a key); a list
whose field has a merge key merges element by element (matched by that key, new elements
added), every other list is replaced whole. Merge keys are those the Go types declare along the
JobSet spec (``replicatedJobs`` by name; a pod spec's containers, volumes, pull secrets and
scheduling gates by name, a container's env by name, mounts by path, ports by number...).

The order of a merged list is the one Kubernetes gives it: the patch's elements in the patch's
order, with the elements only the original has placed among them by their original order where
the two can be compared (an element new in the patch comes before the original's remaining ones).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["JOBSET_SPEC_KEYS", "RESOURCES_KEYS", "MergeKeys", "strategic_merge"]

MergeKeys = Mapping[str, "str | MergeKeys"]
"""Per field: the merge key of a list of objects, or the merge keys one level down (a mapping,
or each element of a list)."""

_CONTAINER: dict[str, Any] = {
    "ports": "containerPort",
    "env": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
}
_CONTAINER_LIST: dict[str, Any] = {"": "name", **_CONTAINER}
"""A list of containers: merged by name, each one's own lists by their keys."""

_META: dict[str, Any] = {"ownerReferences": "uid", "finalizers": ""}

POD_SPEC_KEYS: dict[str, Any] = {
    "volumes": "name",
    "initContainers": _CONTAINER_LIST,
    "containers": _CONTAINER_LIST,
    "ephemeralContainers": _CONTAINER_LIST,
    "imagePullSecrets": "name",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "schedulingGates": "name",
    "resourceClaims": "name",
}

JOBSET_SPEC_KEYS: dict[str, Any] = {
    "replicatedJobs": {
        "": "name",
        "dependsOn": "name",
        "template": {
            "metadata": _META,
            "spec": {"template": {"metadata": _META, "spec": POD_SPEC_KEYS}},
        },
    },
}
"""The merge keys of ``jobsetv1alpha2.JobSetSpec`` (the fields a runtime patch can reach)."""

RESOURCES_KEYS: dict[str, Any] = {"claims": "name"}
"""``corev1.ResourceRequirements``: limits and requests merge per resource, claims by name."""


def strategic_merge(original: Any, patch: Any, keys: MergeKeys) -> Any:
    """``original`` with ``patch`` merged in; neither is changed."""
    return _merge(copy.deepcopy(original), patch, keys)


def _merge(original: Any, patch: Any, keys: Any) -> Any:
    if not isinstance(patch, dict) or not isinstance(original, dict):
        return copy.deepcopy(patch)
    sub = keys if isinstance(keys, dict) else {}
    for field, value in patch.items():
        if value is None:
            original.pop(field, None)
            continue
        here = sub.get(field)
        if isinstance(value, list):
            original[field] = _merge_list(original.get(field), value, here)
        elif isinstance(value, dict):
            have = original.get(field)
            original[field] = _merge(have if isinstance(have, dict) else {}, value, here)
        else:
            original[field] = copy.deepcopy(value)
    return original


def _list_key(keys: Any) -> tuple[str | None, Any]:
    """The merge key of a list field (None: replaced whole) and the keys of its elements."""
    if isinstance(keys, str):
        return keys, {}
    if isinstance(keys, dict) and "" in keys:
        return str(keys[""]), keys
    return None, {}


def _merge_list(original: Any, patch: list[Any], keys: Any) -> list[Any]:
    key, element_keys = _list_key(keys)
    if key is None:
        return copy.deepcopy(patch)
    have = list(original) if isinstance(original, list) else []
    if key == "":  # scalars merged as a set (finalizers)
        merged = list(have)
        merged += [v for v in patch if v not in merged]
        return _ordered(merged, patch, have, ident=lambda v: v)
    merged = list(have)
    for item in patch:
        if not isinstance(item, dict):
            return copy.deepcopy(patch)  # not a list of objects: nothing to merge by
        at = _index(merged, item.get(key), key)
        if at is None:
            merged.append(_merge({}, item, element_keys))
        else:
            merged[at] = _merge(merged[at], item, element_keys)
    return _ordered(merged, patch, have, ident=lambda m: m.get(key))


def _ordered(
    merged: list[Any], patch: list[Any], original: list[Any], *, ident: Callable[[Any], Any]
) -> list[Any]:
    """Kubernetes' order for a merged list (``normalizeElementOrder``): the patch's elements in
    the patch's order, the original's own ones inserted among them in their order."""
    in_patch = [ident(p) for p in patch]
    patched = sorted(
        (m for m in merged if ident(m) in in_patch), key=lambda m: in_patch.index(ident(m))
    )
    server_only = [m for m in merged if ident(m) not in in_patch]
    order = [ident(o) for o in original]
    out: list[Any] = []
    i = j = 0
    while i < len(server_only) or j < len(patched):
        if j >= len(patched):
            out.append(server_only[i])
            i += 1
            continue
        if i >= len(server_only):
            out.append(patched[j])
            j += 1
            continue
        # An original element goes first only when both are in the original and it is earlier
        # there (``mergeSortedSlice``): an element new in the patch is placed before the rest.
        left, right = ident(server_only[i]), ident(patched[j])
        if left in order and right in order and order.index(left) < order.index(right):
            out.append(server_only[i])
            i += 1
        else:
            out.append(patched[j])
            j += 1
    return out


def _index(items: Sequence[Any], value: Any, key: str) -> int | None:
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get(key) == value:
            return i
    return None
