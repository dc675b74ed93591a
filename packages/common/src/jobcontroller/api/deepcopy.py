"""Deep copies of JSON-shaped values and of the models that hold them, without
:func:`copy.deepcopy`'s bookkeeping.

Every reconcile copies the job's status (twice) and its templates (once per pod it may
create); :func:`copy.deepcopy` spends most of that time on its memo (an ``id()`` lookup and a
keep-alive entry per value) and on ``__reduce_ex__`` for datetimes and models. The values
copied here are trees of dicts, lists, strings, numbers and models parsed from JSON, so:

- atoms (``str``, ``int``, ``float``, ``bool``, ``None``, ``bytes``, dates and times, enum
  members) are returned as they are, as :func:`copy.deepcopy` returns them;
- ``dict`` and ``list`` are rebuilt, their values copied;
- a pydantic model is rebuilt as pydantic's own ``__deepcopy__`` does (fields, extra fields,
  the fields set, private attributes);
- a ``dict`` or ``list`` subclass that names, as its ``__copy_as__`` attribute, the type its
  copies take (the caches' read-only and marker types do) is rebuilt as that type;
- anything else goes to :func:`copy.deepcopy`.

One difference: there is no memo, so a value reachable twice in the input is copied twice
(two independent copies where :func:`copy.deepcopy` would keep them one object). Parsed JSON
holds no such sharing, and where a cache shares equal parts between objects, independent
copies are what a writer wants. A cycle would recurse without end; JSON has none.
"""

from __future__ import annotations

import copy
import datetime as dt
import enum
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = ["deep_copy"]

T = TypeVar("T")

_ATOMS: frozenset[type] = frozenset(
    {str, int, float, bool, type(None), bytes, dt.datetime, dt.date, dt.time, dt.timedelta}
)
#: Per class met: the type its copies take (``__copy_as__``), or None.
_COPY_AS: dict[type, type | None] = {}
_set = object.__setattr__


def _copy_as(cls: type) -> type | None:
    try:
        return _COPY_AS[cls]
    except KeyError:
        target = getattr(cls, "__copy_as__", None)
        if not (isinstance(target, type) and issubclass(cls, dict | list)):
            target = None
        _COPY_AS[cls] = target
        return target


def deep_copy(value: T) -> T:
    """A copy of ``value`` that shares nothing mutable with it."""
    cls = type(value)
    if cls in _ATOMS:
        return value
    if cls is dict:
        return {k: deep_copy(v) for k, v in value.items()}  # type: ignore[attr-defined,return-value]
    if cls is list:
        return [deep_copy(v) for v in value]  # type: ignore[attr-defined,return-value]
    target = _copy_as(cls)
    if target is not None:
        if isinstance(value, dict):
            return target((k, deep_copy(v)) for k, v in value.items())  # type: ignore[no-any-return]
        return target(deep_copy(v) for v in value)  # type: ignore[attr-defined,no-any-return]
    if isinstance(value, enum.Enum):
        return value
    if isinstance(value, BaseModel):
        return _copy_model(value)  # type: ignore[no-any-return]
    return copy.deepcopy(value)


def _copy_model(model: BaseModel) -> Any:
    cls = type(model)
    new = cls.__new__(cls)
    _set(new, "__dict__", {k: deep_copy(v) for k, v in model.__dict__.items()})
    extra = model.__pydantic_extra__
    _set(new, "__pydantic_extra__", None if extra is None else deep_copy(extra))
    _set(new, "__pydantic_fields_set__", set(model.__pydantic_fields_set__))
    private = getattr(model, "__pydantic_private__", None)
    if private is not None:
        private = copy.deepcopy({k: v for k, v in private.items() if v is not PydanticUndefined})
    _set(new, "__pydantic_private__", private)
    return new
