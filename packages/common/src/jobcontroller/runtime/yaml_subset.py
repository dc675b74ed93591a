"""The block-style YAML that kubeconfig files are written in, read without PyYAML.

kubectl, kind, cloud CLIs and ``yaml.safe_dump`` write kubeconfigs as block mappings and
sequences of simple keys and plain or quoted one-line scalars. Importing PyYAML to read one
costs an operator started outside a cluster 16 ms of CPU and 2.3 MB of RSS (measured in
docs/performance.md, seventeenth session), more than reading the file. :func:`load` reads
that subset exactly as PyYAML's safe loader does and answers ``None`` for anything else (a
flow collection other than ``{}`` or ``[]``, a scalar PyYAML would type as a number or a
date, an anchor, a tag, a block or multi-line scalar, an escape, a comment after a value,
a duplicate key, a tab, a document marker, non-ASCII text): the caller then hands the text
to PyYAML, so what this module does not read is never misread, only read more slowly.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["load"]


class _NotSubset(Exception):
    """The text leaves the subset: PyYAML reads it."""


# PyYAML's YAML 1.1 resolver: these plain words are not strings.
_WORDS: dict[str, Any] = {
    **dict.fromkeys(("null", "Null", "NULL", "~"), None),
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
# Printable ASCII and line breaks ("\n" or "\r\n") only.
_OUTSIDE = re.compile(r"[^\x20-\x7e\n\r]|\r(?!\n)")
# A key: a word starting with a letter or "_" (no number, date, bool or null can).
_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_.\-/]*):(?: +(.*))?$")
# A plain scalar PyYAML resolves to a string: a letter, "/" or "_" first (a number, a date,
# ".inf" and ".nan" start otherwise), or "-" or "--" before a letter (a command's flag).
_PLAIN = re.compile(r"(?:--?)?[A-Za-z_/][^\"'#]*$")

_Line = tuple[int, str]  # (indent, content without the indent)


def load(text: str) -> dict[str, Any] | None:
    """The block mapping ``text`` holds, as ``yaml.safe_load`` reads it; ``None`` when ``text``
    is not in the subset (an empty one included), for PyYAML to read."""
    if not text.isascii() or _OUTSIDE.search(text):
        return None
    lines: list[_Line] = []
    for raw in text.split("\n"):
        line = raw.rstrip("\r").rstrip(" ")
        content = line.lstrip(" ")
        if content and not content.startswith("#"):
            lines.append((len(line) - len(content), content))
    if not lines or lines[0][0] != 0:
        return None
    try:
        doc, end = _block(lines, 0)
    except _NotSubset:
        return None
    # A block ends at a line indented less than its own, or where it is not a block's line;
    # a line left over (one indented more: a continuation, or an error) is PyYAML's to read.
    return doc if end == len(lines) and isinstance(doc, dict) else None


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _block(lines: list[_Line], i: int) -> tuple[Any, int]:
    if _is_item(lines[i][1]):
        return _sequence(lines, i)
    return _mapping(lines, i)


def _mapping(lines: list[_Line], i: int) -> tuple[dict[str, Any], int]:
    indent = lines[i][0]
    out: dict[str, Any] = {}
    while i < len(lines) and lines[i][0] == indent and not _is_item(lines[i][1]):
        match = _KEY.match(lines[i][1])
        if match is None or match[1] in _WORDS or match[1] in out:
            raise _NotSubset
        key, rest = match[1], match[2]
        i += 1
        if rest:
            out[key] = _scalar(rest)
        elif i < len(lines) and (
            lines[i][0] > indent or (lines[i][0] == indent and _is_item(lines[i][1]))
        ):
            out[key], i = _block(lines, i)
        else:
            out[key] = None
    return out, i


def _sequence(lines: list[_Line], i: int) -> tuple[list[Any], int]:
    indent = lines[i][0]
    out: list[Any] = []
    while i < len(lines) and lines[i][0] == indent and _is_item(lines[i][1]):
        content = lines[i][1]
        if content == "-":
            i += 1
            if i < len(lines) and lines[i][0] > indent:
                item, i = _block(lines, i)
                out.append(item)
            else:
                out.append(None)
            continue
        rest = content[2:].lstrip(" ")
        if rest.startswith("-") and _is_item(rest):
            raise _NotSubset  # a sequence in a sequence's item: not in kubeconfigs
        if _KEY.match(rest):
            # "- key: value": the item is a mapping whose keys sit where this one starts.
            lines[i] = (indent + len(content) - len(rest), rest)
            item, i = _mapping(lines, i)
        else:
            item, i = _scalar(rest), i + 1
        out.append(item)
    return out, i


def _scalar(text: str) -> Any:
    if text == "{}":
        return {}
    if text == "[]":
        return []
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        inner = text[1:-1]
        if text[0] in inner or "\\" in inner:
            raise _NotSubset  # an escape, or a quote doubled or ending early
        return inner
    if text in _WORDS:
        return _WORDS[text]
    if not _PLAIN.match(text) or " #" in text or ": " in text or text.endswith(":"):
        raise _NotSubset
    return text
