"""JSON for the API client: orjson on the hot path, the standard library where orjson differs.

orjson encodes to bytes and decodes bytes in one pass (no ``str`` copy of a watch line or a
list body first), several times faster than :mod:`json`: in a burst of pod creations the client
spends a good part of its CPU here (bench/bench_requests.py). Where orjson would answer
differently from :mod:`json`, the standard library decides, so every value means what it meant:

- on decode, a document with a run of 19 or more digits (an integer that may be beyond 64 bits,
  which orjson turns into a float and json keeps exact; or a long float, decoded alike by
  both), ``NaN``/``Infinity`` literals, and anything orjson refuses are handed to :mod:`json`
  (which parses, or raises :class:`json.JSONDecodeError` exactly as before);
- on encode, integers beyond 64 bits and non-string keys (orjson refuses them) go to :mod:`json`;
- on encode, subclasses of ``str``/``int``/``dict``/``list``, dataclasses and datetimes are
  handed to :mod:`json` too (orjson would serialize some that :mod:`json` refuses), and so is
  every ``float`` that is not finite (orjson writes ``null`` where :mod:`json` writes ``NaN``).
  The one difference left: a plain :class:`enum.Enum` member is written as its value, where
  :mod:`json` raised ``TypeError`` (no body of ours carries one).

Encoded bodies are compact (no spaces after ``,`` and ``:``): only the API server reads them.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson

__all__ = ["dumps", "loads"]

_PASSTHROUGH = (
    orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def _refuse(value: Any) -> Any:
    raise TypeError(f"orjson leaves {type(value).__name__} to json")


def dumps(value: Any) -> bytes:
    """``value`` as a compact UTF-8 JSON body."""
    try:
        data = orjson.dumps(value, default=_refuse, option=_PASSTHROUGH)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return json.dumps(value, separators=(",", ":")).encode()
    # orjson writes a non-finite float as null; json as NaN/Infinity. Checked only when the
    # body has a float that could be one (rare in Kubernetes objects, which carry strings).
    if b"null" in data and _has_non_finite(value):
        return json.dumps(value, separators=(",", ":")).encode()
    return data


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    return False


#: Every digit made a 0, so a run of 19 digits (the shortest integer outside int64 has 19:
#: -9223372036854775809) is found by a substring search: about 1 µs for a pod's watch line,
#: where ``re.search(rb"\d{19}")`` took 14 µs, more than decoding it.
_DIGITS_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19


def loads(data: bytes | bytearray | str) -> Any:
    """The value of a JSON document; :class:`json.JSONDecodeError` when it is not one."""
    raw = data.encode() if isinstance(data, str) else data
    if _LONG_NUMBER in raw.translate(_DIGITS_TO_ZERO):
        return json.loads(data)
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        # NaN literals, which json accepts, or a malformed body, for which json raises the
        # error callers have always seen.
        return json.loads(data)
