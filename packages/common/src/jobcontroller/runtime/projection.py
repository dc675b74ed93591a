"""What a cache keeps of each object: a projection, applied on arrival.

client-go's informers keep whole objects (a ``TransformFunc`` may trim them); a pod with its
containers' env, command, volumes and probes is several KB of which a job controller reads a
few hundred bytes. A :data:`Shape` names the fields the readers of a cache use (the planner,
the executor, the status writer, telemetry, the NodeLost watch); :func:`project` builds a new,
smaller object holding only those, so the decoded original and every dropped field are freed at
once (popping keys would leave each dict's table at its decoded size). Short strings are
interned on the way: label keys and values, phases, reasons and timestamps repeat across
thousands of pods and are then held once.

A projected object must never be written back whole (a PUT of it would wipe what was dropped):
the controllers change pods and services only by merge patches and deletes, and
:class:`~jobcontroller.runtime.kube.KubeApi` refuses to PUT a :class:`Projected` object.

``tests/unit/test_cache_projection.py`` plans every example job from full and from projected
(and :func:`guarded`) objects: a reader that starts to use a dropped field fails there, and the
field then belongs in the shape.
"""

from __future__ import annotations

import copy
import sys
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Final, NoReturn

import orjson
from typing_extensions import override

__all__ = [
    "POD_SHAPE",
    "POD_SHAPE_STARTED",
    "SERVICE_SHAPE",
    "DroppedFieldRead",
    "Projected",
    "Shape",
    "SharedDict",
    "SharedList",
    "SharedObjectWrite",
    "guarded",
    "intern_strings",
    "pod_shape",
    "project",
    "project_pod",
    "project_service",
    "shared_parts",
]

#: ``key -> None`` keeps the value whole; ``key -> Shape`` projects a mapping; ``key ->
#: [Shape]`` projects every item of a list. A shape is read once, when :func:`project` first
#: meets it: make a new one rather than changing it.
Shape = Mapping[str, Any]

_INTERN_MAX = 64
#: Values unique to one object: interning them would only grow the interpreter's table.
_UNIQUE: Final = frozenset({"uid", "resourceVersion", "message"})

#: Annotations no controller reads, too large to keep on every pod: the progress endpoint's CA
#: a v1 job's pods carry for the downward API (``core.progress.CA_ANNOTATION``).
_UNREAD_ANNOTATIONS: Final = frozenset({"training.kubeflow.org/progress-ca"})

#: metadata: ownerReferences stay whole (an adoption or a foreign-owner check reads them, and
#: no field of theirs is large); managedFields and everything else go.
_META: Final[Shape] = {
    "name": None,
    "generateName": None,
    "namespace": None,
    "uid": None,
    "resourceVersion": None,
    "generation": None,
    "creationTimestamp": None,
    "deletionTimestamp": None,
    "deletionGracePeriodSeconds": None,
    "labels": None,
    "annotations": None,
    "ownerReferences": None,
    "finalizers": None,
}

#: A container's state as the controllers read it: an exit code, its reason and message, when
#: it finished, why it waits. A running container's ``startedAt`` and a terminated one's
#: ``startedAt`` and ``containerID`` go: they are the pod's own, so a status holding them could
#: not be shared with its job's other pods.
_STATE: Final[Shape] = {
    "running": {},
    "waiting": {"reason": None, "message": None},
    "terminated": {
        "exitCode": None,
        "signal": None,
        "reason": None,
        "message": None,
        "finishedAt": None,
    },
}

#: ``lastState`` (the run before a restart) goes: the restart rules read ``restartCount``.
_CONTAINER_STATUS: Final[Shape] = {
    "name": None,
    "state": _STATE,
    "ready": None,
    "started": None,
    "restartCount": None,
}

#: An init container's: read only for the warnings about a pod whose containers have no
#: status yet, so no ``finishedAt`` either (only the training container's end is compared).
_INIT_CONTAINER_STATUS: Final[Shape] = {
    **_CONTAINER_STATUS,
    "state": {
        **_STATE,
        "terminated": {"exitCode": None, "signal": None, "reason": None, "message": None},
    },
}

_SPEC: Final[Shape] = {
    "containers": [{"name": None}],
    "initContainers": [{"name": None}],
    "nodeName": None,
    "schedulerName": None,
    "restartPolicy": None,
}

#: A pod as job controllers read it: container names (the framework's default container, an
#: MPI launcher's first one), the node (NodeLost), and the status minus images, IPs and the
#: pod's own timestamps. This is the shape of a pod none of whose containers has a status yet
#: (Pending): its newest condition, reason and message included, is what a warning about a
#: pod that cannot be scheduled reports (``core.replicas.abnormal_pod_events``).
POD_SHAPE: Final[Shape] = {
    "apiVersion": None,
    "kind": None,
    "metadata": _META,
    "spec": _SPEC,
    "status": {
        "phase": None,
        "reason": None,
        "message": None,
        "conditions": [
            {
                "type": None,
                "status": None,
                "reason": None,
                "message": None,
                "lastTransitionTime": None,
            }
        ],
        "containerStatuses": [_CONTAINER_STATUS],
        "initContainerStatuses": [_INIT_CONTAINER_STATUS],
    },
}

#: A pod once a container has a status (nearly every pod a cache holds): its conditions are read
#: only for Ready (``core.replicas.is_pod_ready``), so each keeps its type and status, and a
#: Running pod's status holds nothing of its own: one status is shared by the pods in the
#: same state, however far apart they started (3.9 KB a pod to 1.3 KB in
#: ``bench/bench_cache_object.py --per-second 1``).
POD_SHAPE_STARTED: Final[Shape] = {
    **POD_SHAPE,
    "status": {
        **POD_SHAPE["status"],
        "conditions": [{"type": None, "status": None}],
    },
}


def pod_shape(pod: Mapping[str, Any]) -> Shape:
    """The shape a cache keeps of ``pod``: :data:`POD_SHAPE_STARTED` once any of its
    containers has a status, :data:`POD_SHAPE` before."""
    status = pod.get("status")
    if isinstance(status, dict) and (
        status.get("containerStatuses") or status.get("initContainerStatuses")
    ):
        return POD_SHAPE_STARTED
    return POD_SHAPE


#: A Service: the fields an MPIJob's job-wide Service keeps in line (selector,
#: publishNotReadyAddresses) and its headless-ness; ports, IP families and status go.
SERVICE_SHAPE: Final[Shape] = {
    "apiVersion": None,
    "kind": None,
    "metadata": _META,
    "spec": {"selector": None, "publishNotReadyAddresses": None, "clusterIP": None},
}


class Projected(dict[str, Any]):
    """An object reduced by :func:`project` (a plain dict otherwise, with no extra memory):
    the marker lets the API client refuse to PUT it. A copy of one (``copy.copy``,
    ``copy.deepcopy``) is a writable :class:`Projected`, still refused."""

    __slots__ = ()
    #: What its copies are (jobcontroller.api.deepcopy; ``copy.deepcopy`` agrees).
    __copy_as__: ClassVar[type[dict[str, Any]]]


Projected.__copy_as__ = Projected


class DroppedFieldRead(AssertionError):
    """A reader looked up a field its cache's projection drops (raised by :func:`guarded`)."""


class SharedObjectWrite(TypeError):
    """Code tried to change a cached object in place. Cached objects' parts are shared
    between objects and readers: copy first (``copy.deepcopy``, ``dict(...)``)."""


def _refuse(self: object, *args: object, **kwargs: object) -> NoReturn:
    raise SharedObjectWrite(f"a cached {type(self).__name__} is read-only: copy it to change it")


class _Frozen(Projected):
    """What the caches store at the top and as metadata: a :class:`Projected` that refuses
    writes, since its parts are shared with other cached objects."""

    __slots__ = ()
    __copy_as__ = Projected
    __setitem__ = __delitem__ = __ior__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def __copy__(self) -> Projected:
        return Projected(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> Projected:
        return Projected((k, copy.deepcopy(v, memo)) for k, v in self.items())


class SharedDict(dict[str, Any]):
    """A mapping inside a cached object, held once for all the objects that have an equal one
    (the pods and Services of a job share their ownerReferences, started pods in the same
    state their status): read-only and hashable. Its copies are plain, writable dicts."""

    __slots__ = ("_hash",)
    _hash: int
    __copy_as__ = dict
    __setitem__ = __delitem__ = __ior__ = __setattr__ = __delattr__ = _refuse
    clear = pop = popitem = setdefault = update = _refuse

    def _seal(self) -> None:
        """Compute and keep its hash: read-only, it never changes, and a part that holds it
        then hashes it in O(1) instead of walking it again."""
        _set_dict_hash(self, hash(frozenset(self.items())))

    @override
    def __hash__(self) -> int:  # type: ignore[override]  # read-only, so it can be hashed
        try:
            return self._hash
        except AttributeError:  # made outside the projection: sealed on first use
            self._seal()
            return self._hash

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}


class SharedList(list[Any]):
    """A list inside a cached object, shared as a :class:`SharedDict` is."""

    __slots__ = ("_hash",)
    _hash: int
    __copy_as__ = list
    __setitem__ = __delitem__ = __iadd__ = __imul__ = __setattr__ = __delattr__ = _refuse
    append = clear = extend = insert = pop = remove = reverse = sort = _refuse

    def _seal(self) -> None:
        """As :meth:`SharedDict._seal`."""
        _set_list_hash(self, hash(tuple(self)))

    @override
    def __hash__(self) -> int:  # type: ignore[override]  # read-only, so it can be hashed
        try:
            return self._hash
        except AttributeError:
            self._seal()
            return self._hash

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return [copy.deepcopy(v, memo) for v in self]


#: The hash slots, written past the refused ``__setattr__``: only :meth:`SharedDict._seal` and
#: :meth:`SharedList._seal` set them.
_set_dict_hash = SharedDict.__dict__["_hash"].__set__
_set_list_hash = SharedList.__dict__["_hash"].__set__


def _alike(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down (``1 == True == 1.0`` is not enough)."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    # Parts are shared bottom-up, so equal children are mostly the same object already:
    # checked inline, without a call.
    if isinstance(a, dict):
        if a.keys() != b.keys():
            return False
        for k, v in a.items():
            w = b[k]
            if v is not w and not _alike(v, w):
                return False
        return True
    if isinstance(a, list):
        if len(a) != len(b):
            return False
        for v, w in zip(a, b, strict=True):  # noqa: SIM110  (a loop: no generator's cost)
            if v is not w and not _alike(v, w):
                return False
        return True
    return bool(a == b)


class _Table:
    """The parts of cached objects, each held once: a part equal to one held already is
    replaced by that one. Parts no cached object uses any more are dropped whenever the table
    has doubled since it was last swept, so it stays within twice what the caches use."""

    def __init__(self) -> None:
        self._parts: dict[Any, Any] = {}
        self._sweep_at = _SWEEP_MIN
        self._lone = self._calibrate()

    def _calibrate(self) -> int:
        """The reference count :meth:`_sweep` sees for a part that only the table holds."""
        part = SharedList()
        self._parts[part] = part
        counts = [sys.getrefcount(held) for held in list(self._parts) if held is part]
        del self._parts[part]
        return counts[0] - 1  # less the local name ``part``

    def share(self, part: SharedDict | SharedList) -> Any:
        part._seal()
        held = self._parts.get(part)
        if held is None:
            if len(self._parts) >= self._sweep_at:
                self._sweep()
            self._parts[part] = part
            return part
        return held if _alike(held, part) else part

    def _sweep(self) -> None:
        lone = self._lone
        for held in list(self._parts):
            if sys.getrefcount(held) <= lone:
                del self._parts[held]
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._parts))

    def __len__(self) -> int:
        return len(self._parts)


_SWEEP_MIN = 4096
#: One table for all the caches of the process (a pod and its Service share labels and
#: owners). Informers run in the event loop's thread: no lock.
_SHARED = _Table()
_share = _SHARED.share
_intern = sys.intern


def _interned(value: Any, key: str = "") -> Any:
    kind = type(value)
    if kind is not str and kind is not dict and kind is not list:
        # Decoded JSON has exact types; anything else is matched as it always was.
        if isinstance(value, str):
            kind = str
        elif isinstance(value, dict):
            kind = dict
        elif isinstance(value, list):
            kind = list
        else:
            return value
    if kind is str:
        if len(value) <= _INTERN_MAX and key not in _UNIQUE:
            return _intern(value)
        return value
    if kind is dict:
        return _share(SharedDict({_intern(k): _interned(v, k) for k, v in value.items()}))
    return _share(SharedList([_interned(v, key) for v in value]))


_Projector = Callable[[Any, str], Any]


def _compile(shape: Any) -> _Projector:
    """A function projecting a value by ``shape`` (its keys walked once, here, not on every
    object): ``None`` keeps the value whole, a list projects each item by its one shape, a
    mapping keeps its keys in the shape's order. A value not of the shape's type is kept
    whole, as ``None`` would."""
    if shape is None:
        return _interned
    if isinstance(shape, list):
        item = _compile(shape[0])

        def project_list(value: Any, key: str) -> Any:
            if not isinstance(value, list):
                return _interned(value, key)
            return _share(SharedList([item(v, key) for v in value]))

        return project_list
    fields = tuple((k, _compile(sub)) for k, sub in shape.items())

    def project_mapping(value: Any, key: str) -> Any:
        if not isinstance(value, dict):
            return _interned(value, key)
        return _share(SharedDict({k: f(value[k], k) for k, f in fields if k in value}))

    return project_mapping


def _compile_object(shape: Shape) -> Callable[[Mapping[str, Any]], Projected]:
    fields = tuple((k, _compile(sub)) for k, sub in shape.items())
    meta_shape = shape.get("metadata")
    meta_fields = (
        tuple((k, _compile(sub)) for k, sub in meta_shape.items())
        if isinstance(meta_shape, Mapping)
        else None
    )

    def project_object(obj: Mapping[str, Any]) -> Projected:
        kept: dict[str, Any] = {}
        for k, f in fields:
            if k not in obj:
                continue
            value = obj[k]
            if k == "metadata" and meta_fields is not None and isinstance(value, dict):
                # Metadata is one object's own (name, uid): projected field by field, not
                # shared.
                annotations = value.get("annotations")
                if isinstance(annotations, dict) and not _UNREAD_ANNOTATIONS.isdisjoint(
                    annotations
                ):
                    unread = _UNREAD_ANNOTATIONS
                    annotations = {a: v for a, v in annotations.items() if a not in unread}
                    value = {**value, "annotations": annotations}
                kept[k] = _Frozen({m: g(value[m], m) for m, g in meta_fields if m in value})
            else:
                kept[k] = f(value, k)
        return _Frozen(kept)

    return project_object


#: Compiled shapes by identity; each entry keeps its shape, so an id is never reused while
#: it is here. Bounded for callers that pass a new shape each time (tests).
_COMPILED: dict[int, tuple[Shape, Callable[[Mapping[str, Any]], Projected]]] = {}


def project(obj: Mapping[str, Any], shape: Shape) -> Projected:
    """A new, read-only object holding only ``shape``'s fields of ``obj`` (which is left as
    it is); its parts are shared with the cached objects that have equal ones. Its metadata
    is marked :class:`Projected` too, so a shallow copy (``{**obj, "spec": ...}``) stays
    refusable."""
    entry = _COMPILED.get(id(shape))
    if entry is None or entry[0] is not shape:
        if len(_COMPILED) >= 64:
            _COMPILED.clear()
        entry = _COMPILED[id(shape)] = (shape, _compile_object(shape))
    return entry[1](obj)


def intern_strings(value: Any, *, key: str = "", like: Any = None) -> None:
    """Replace, in place, the short strings of a decoded mapping or list by their interned
    copies (those unique to one object excepted), as :func:`project` does for the objects it
    builds; for caches that keep whole objects.

    ``like`` is the version of the same object already cached: a part of ``value`` equal to
    the part at the same place in ``like`` is replaced by that one, interned already, instead
    of walked (comparing is done in C, walking in Python: a job's status write leaves its
    spec, labels and owner references as they were; an MPIJob's update event 26-37 → 17-23
    µs)."""
    if isinstance(value, dict):
        similar = like if isinstance(like, dict) else None
        for k, v in value.items():
            if isinstance(v, str):
                if len(v) <= _INTERN_MAX and k not in _UNIQUE:
                    value[k] = sys.intern(v)
            elif isinstance(v, dict | list):
                before = similar.get(k) if similar is not None else None
                if before is not None and _same(before, v):
                    value[k] = before
                else:
                    intern_strings(v, key=k, like=before)
    elif isinstance(value, list):
        similar_items = like if isinstance(like, list) else ()
        for i, v in enumerate(value):
            if isinstance(v, str):
                if len(v) <= _INTERN_MAX and key not in _UNIQUE:
                    value[i] = sys.intern(v)
            elif isinstance(v, dict | list):
                before = similar_items[i] if i < len(similar_items) else None
                if before is not None and _same(before, v):
                    value[i] = before
                else:
                    intern_strings(v, key=key, like=before)


def _same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down, compared in C: ``==`` (true of ``1``,
    ``1.0`` and ``True`` alike), then the JSON each is written as."""
    if a != b:
        return False
    try:
        return bool(orjson.dumps(a) == orjson.dumps(b))
    except TypeError:  # an integer beyond 64 bits: not lent
        return False


def shared_parts() -> int:
    """How many distinct parts the caches' objects hold now (for tests and benchmarks)."""
    return len(_SHARED)


def project_pod(obj: dict[str, Any]) -> dict[str, Any]:
    """:func:`project` with :func:`pod_shape` (an informer's ``transform``)."""
    return project(obj, pod_shape(obj))


def project_service(obj: dict[str, Any]) -> dict[str, Any]:
    """:func:`project` with :data:`SERVICE_SHAPE` (an informer's ``transform``)."""
    return project(obj, SERVICE_SHAPE)


class _Guarded(dict[str, Any]):
    """A projected mapping that raises :class:`DroppedFieldRead` when a key the projection
    dropped is looked up (``[]``, ``get``, ``in``); for tests."""

    __slots__ = ("_dropped", "_where")
    __copy_as__ = dict

    def __init__(self, data: dict[str, Any], dropped: frozenset[str], where: str) -> None:
        super().__init__(data)
        self._dropped = dropped
        self._where = where

    def _check(self, key: object) -> None:
        if key in self._dropped:
            raise DroppedFieldRead(f"{self._where}.{key} is dropped by the cache's projection")

    @override
    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    @override
    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    @override
    def __contains__(self, key: object) -> bool:
        self._check(key)
        return super().__contains__(key)

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        return {k: copy.deepcopy(v, memo) for k, v in self.items()}


def _guard(value: Any, shape: Any, where: str) -> Any:
    if shape is None:
        return value
    if isinstance(shape, list):
        if not isinstance(value, list):
            return value
        return [_guard(item, shape[0], f"{where}[]") for item in value]
    if not isinstance(value, dict):
        return value
    kept = {k: _guard(value[k], sub, f"{where}.{k}") for k, sub in shape.items() if k in value}
    return _Guarded(kept, frozenset(value) - frozenset(kept), where)


def guarded(obj: Mapping[str, Any], shape: Shape) -> dict[str, Any]:
    """``obj`` projected by ``shape`` whose mappings raise :class:`DroppedFieldRead` on a
    lookup of a field ``obj`` had and the projection dropped: a test's way to catch a reader
    of a dropped field."""
    result: dict[str, Any] = _guard(dict(obj), shape, "")
    return result
