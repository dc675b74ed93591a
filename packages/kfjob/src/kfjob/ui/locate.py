"""Where in a pasted YAML an error is: the line of the field an error names.

Render's errors name fields as admission does (``spec.tfReplicaSpecs.Worker.replicas``,
``spec.pytorchReplicaSpecs[Master].replicas``, ``...containers[0].name``); YAML syntax errors
carry a line of their own. :func:`field_line` walks the composed YAML (nodes keep their marks)
along the path as far as it exists, so a missing field points at its parent.
"""

from __future__ import annotations

import re

import yaml

__all__ = ["document_nodes", "field_line", "split_error"]

_PART = re.compile(r"\[([^\]]*)\]|([^.\[\]]+)")
_PATH = re.compile(r"^[A-Za-z][\w\-]*(?:(?:\.[\w\-/]+)|\[[^\]]*\])*$")


def document_nodes(text: str) -> list[yaml.Node]:
    """The job documents of ``text`` as nodes, in the order ``load_documents`` returns them
    (a ``List``'s items in its place); ``[]`` when the text is not valid YAML."""
    try:
        docs = [d for d in yaml.compose_all(text, Loader=yaml.SafeLoader) if d is not None]
    except yaml.YAMLError:
        return []
    out: list[yaml.Node] = []
    for doc in docs:
        items = _get(doc, "items") if _scalar(_get(doc, "kind")) == "List" else None
        if isinstance(items, yaml.SequenceNode):
            out += [i for i in items.value if isinstance(i, yaml.MappingNode)]
        else:
            out.append(doc)
    return out


def _scalar(node: yaml.Node | None) -> str | None:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else None


def _get(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for k, v in node.value:
        if _scalar(k) == key:
            return v  # type: ignore[no-any-return]  # pyyaml's node values are untyped
    return None


def split_error(error: str) -> tuple[str, str]:
    """``("spec.x.y", "message")`` for an error that starts with a field path, else
    ``("", error)``."""
    head, sep, rest = error.partition(": ")
    if sep and _PATH.match(head):
        return head, rest
    return "", error


def field_line(doc: yaml.Node, path: str) -> int:
    """The 1-based line of the deepest node along ``path`` in ``doc`` (its key's line for a
    mapping entry)."""
    node: yaml.Node = doc
    line = doc.start_mark.line + 1
    for match in _PART.finditer(path):
        part = match.group(1) if match.group(1) is not None else match.group(2)
        if isinstance(node, yaml.SequenceNode) and part.isdigit():
            if int(part) >= len(node.value):
                break
            node = node.value[int(part)]
            line = node.start_mark.line + 1
            continue
        if not isinstance(node, yaml.MappingNode):
            break
        entry = next(((k, v) for k, v in node.value if _scalar(k) == part), None)
        if entry is None:
            break
        line = entry[0].start_mark.line + 1
        node = entry[1]
    return line
