"""The informer's cache: objects by ``namespace/name`` plus secondary indexes.

Controllers read this instead of the API server: "which pods does job X own" is an index lookup
(:meth:`Store.by_owner_uid`, or :meth:`Store.by_label` on ``training.kubeflow.org/job-name``), not a
LIST. The store holds the objects the informer decoded; they are shared with every reader, so
readers must treat them as read-only (copy before changing one to write it back).

Keys follow client-go's ``MetaNamespaceKeyFunc``: ``namespace/name``, or ``name`` for a
cluster-scoped object.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from msgspec import Struct, field

Obj = dict[str, Any]
IndexFunc = Callable[[Obj], Iterable[str]]
#: Aliases for annotations inside Store, where ``list`` names a method.
ObjList = list[Obj]
StrList = list[str]

#: Name of the built-in index on the controller ownerReference's uid.
OWNER_UID_INDEX = "owner-uid"


def object_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    name = str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


def make_key(namespace: str | None, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def resource_version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))


def older_than_stored(obj: Obj, stored: Obj | None) -> bool:
    """Whether ``obj`` is an older version of the same object than ``stored``.

    The store is written by the informer and, for the jobs, by the status writer with the
    object its own PUT returned (controller/status.py): the watch can then bring a version
    older than the stored one (our previous write, still on its way). Storing it would have
    the next reconcile plan from the job as it was before (a finished job as running). As
    client-go's MutationCache does, resourceVersions of one object are compared as the
    integers the API server makes them (KEP-5504, stable since Kubernetes 1.35, makes that
    comparison part of the API); one that is not an integer is never older. For watch events
    only: a relist is the truth, even if it looks older (etcd restored from a backup).
    """
    if stored is None:
        return False
    meta, stored_meta = obj.get("metadata") or {}, stored.get("metadata") or {}
    if meta.get("uid") != stored_meta.get("uid"):
        return False
    rv, stored_rv = (
        str(meta.get("resourceVersion", "")),
        str(stored_meta.get("resourceVersion", "")),
    )
    return rv.isdigit() and stored_rv.isdigit() and int(rv) < int(stored_rv)


def same_version(obj: Obj, stored: Obj | None) -> bool:
    """Whether ``obj`` is the very version ``stored`` holds: same uid, same resourceVersion
    (the API server gives every write of an object a new one)."""
    if stored is None:
        return False
    meta, stored_meta = obj.get("metadata") or {}, stored.get("metadata") or {}
    rv = meta.get("resourceVersion")
    return (
        bool(rv)
        and rv == stored_meta.get("resourceVersion")
        and meta.get("uid") == stored_meta.get("uid")
    )


def controller_owner_uid(obj: Obj) -> list[str]:
    """The uid of the ownerReference with ``controller: true`` (at most one by API rules)."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller") and ref.get("uid"):
            return [str(ref["uid"])]
    return []


def label_index(label_key: str) -> IndexFunc:
    """Index function on one label's value."""

    def values(obj: Obj) -> list[str]:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        value = labels.get(label_key)
        return [str(value)] if value is not None else []

    return values


def _label_index_name(label_key: str) -> str:
    return f"label:{label_key}"


class ReplaceDiff(Struct):
    """What a relist changed, in the order handlers should hear about it."""

    added: list[Obj] = field(default_factory=list)
    updated: list[tuple[Obj, Obj]] = field(default_factory=list)
    """(old, new) pairs whose resourceVersion changed."""
    deleted: list[Obj] = field(default_factory=list)
    """Last known state of objects missing from the new list."""


#: Keys per index value held as a tuple; more go into a set. Most values are an owner's uid,
#: shared by a job's few pods: a tuple of 5 keys is 80 bytes, a set of 5 is 728.
_TUPLE_MAX = 8


class _Index:
    """Keys by value and values by key. One value (the common case) is held as itself, not
    in a 1-tuple, and a value's keys are a tuple while few (above): at 150,000 pods the
    containers would weigh more than the keys they hold."""

    __slots__ = ("fn", "keys_by_value", "values_by_key")

    def __init__(self, fn: IndexFunc) -> None:
        self.fn = fn
        self.keys_by_value: dict[str, tuple[str, ...] | set[str]] = {}
        self.values_by_key: dict[str, str | tuple[str, ...]] = {}

    def keys(self, value: str) -> Iterable[str]:
        return self.keys_by_value.get(value, ())

    def insert(self, key: str, obj: Obj) -> None:
        found = tuple(dict.fromkeys(self.fn(obj)))
        values: str | tuple[str, ...] = found[0] if len(found) == 1 else found
        old = self.values_by_key.get(key, ())
        if values == old:
            return
        self.remove(key)
        if not found:
            return
        self.values_by_key[key] = values
        for value in found:
            keys = self.keys_by_value.get(value, ())
            if isinstance(keys, set):
                keys.add(key)
            elif key not in keys:
                more = (*keys, key)
                self.keys_by_value[value] = more if len(more) <= _TUPLE_MAX else set(more)

    def remove(self, key: str) -> None:
        values = self.values_by_key.pop(key, ())
        for value in (values,) if isinstance(values, str) else values:
            keys = self.keys_by_value.get(value)
            if keys is None:
                continue
            if isinstance(keys, set):
                keys.discard(key)
                left: tuple[str, ...] | set[str] = keys
            else:
                left = tuple(k for k in keys if k != key)
            if not left:
                del self.keys_by_value[value]
            elif left is not keys:
                self.keys_by_value[value] = left


class Store:
    """Objects of one informer, keyed ``namespace/name``, with named indexes."""

    def __init__(self) -> None:
        self._items: dict[str, Obj] = {}
        self._indexes: dict[str, _Index] = {}
        self.add_index(OWNER_UID_INDEX, controller_owner_uid)

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    # -- reads --------------------------------------------------------------------------------

    def get(self, namespace: str | None, name: str) -> Obj | None:
        return self._items.get(make_key(namespace, name))

    def get_by_key(self, key: str) -> Obj | None:
        return self._items.get(key)

    def list(self, *, namespace: str | None = None) -> ObjList:
        if namespace is None:
            return list(self._items.values())
        return [o for o in self._items.values() if o["metadata"].get("namespace") == namespace]

    def keys(self) -> StrList:
        return list(self._items)

    def by_index(self, name: str, value: str) -> ObjList:
        return [self._items[k] for k in self.index_keys(name, value)]

    def index_keys(self, name: str, value: str) -> StrList:
        index = self._indexes.get(name)
        if index is None:
            raise KeyError(f"no index named {name!r}")
        return sorted(index.keys(value))

    def index_values(self, name: str) -> StrList:
        """Every value the index currently holds (e.g. all owner uids seen)."""
        index = self._indexes.get(name)
        if index is None:
            raise KeyError(f"no index named {name!r}")
        return list(index.keys_by_value)

    def by_owner_uid(self, uid: str) -> ObjList:
        """Objects whose controller ownerReference points at ``uid``."""
        return self.by_index(OWNER_UID_INDEX, uid)

    def by_label(self, label_key: str, value: str) -> ObjList:
        """Objects with ``label_key=value``; the label index must have been added."""
        return self.by_index(_label_index_name(label_key), value)

    # -- indexes ------------------------------------------------------------------------------

    def add_index(self, name: str, fn: IndexFunc) -> None:
        """Register an index; objects already stored are indexed at once."""
        if name in self._indexes:
            raise ValueError(f"index {name!r} already exists")
        index = _Index(fn)
        for key, obj in self._items.items():
            index.insert(key, obj)
        self._indexes[name] = index

    def add_label_index(self, label_key: str) -> None:
        name = _label_index_name(label_key)
        if name not in self._indexes:
            self.add_index(name, label_index(label_key))

    # -- writes (the informer's) --------------------------------------------------------------

    def upsert(self, obj: Obj) -> Obj | None:
        """Store ``obj``; returns the object it replaced."""
        key = object_key(obj)
        old = self._items.get(key)
        self._items[key] = obj
        for index in self._indexes.values():
            index.insert(key, obj)
        return old

    def remove(self, obj: Obj) -> Obj | None:
        """Drop the object with ``obj``'s key; returns the stored one, if any."""
        key = object_key(obj)
        old = self._items.pop(key, None)
        if old is not None:
            for index in self._indexes.values():
                index.remove(key)
        return old

    def replace(self, objs: Iterable[Obj]) -> ReplaceDiff:
        """Make the store hold exactly ``objs`` (a relist) and report the difference.

        An object listed with an unchanged resourceVersion is neither added nor updated: nothing
        happened to it while the watch was down.
        """
        diff = ReplaceDiff()
        fresh: dict[str, Obj] = {}
        for obj in objs:
            key = object_key(obj)
            fresh[key] = obj
            old = self._items.get(key)
            if old is None:
                diff.added.append(obj)
            elif resource_version(old) != resource_version(obj):
                diff.updated.append((old, obj))
        for key, old in self._items.items():
            if key not in fresh:
                diff.deleted.append(old)
        for old in diff.deleted:
            self.remove(old)
        for key, obj in fresh.items():
            if self._items.get(key) is not obj:
                self._items[key] = obj
                for index in self._indexes.values():
                    index.insert(key, obj)
        return diff
