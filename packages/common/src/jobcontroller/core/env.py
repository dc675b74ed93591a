"""Setting environment variables in a pod template, for a framework's ``set_cluster_spec``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jobcontroller.api.deepcopy import deep_copy

__all__ = ["set_env"]


def set_env(
    template: dict[str, Any],
    env: Mapping[str, str] | Iterable[tuple[str, str] | dict[str, Any]],
    *,
    containers: str | Iterable[str] | None = None,
    override: bool = False,
) -> None:
    """Add ``env`` (in order) to the containers of a pod template, in place, after the
    containers' own variables.

    ``env``: a mapping of names to values, ``(name, value)`` pairs, or whole EnvVar dicts
    (``{"name": ..., "valueFrom": ...}``). ``containers``: a container name, several, or None
    for every container; init containers are never touched. A variable a container already
    defines is left as the user set it and not added again, unless ``override``: then the
    user's definition is dropped and the operator's appended with the others, so the operator's
    value wins and every name is defined once (training-operator v1.9 appended duplicates, and
    the kubelet took the last one: the same outcome).
    """
    items = [
        dict(item) if isinstance(item, dict) else {"name": item[0], "value": item[1]}
        for item in (env.items() if isinstance(env, Mapping) else env)
    ]
    names = {containers} if isinstance(containers, str) else containers
    wanted = None if names is None else set(names)
    for container in (template.get("spec") or {}).get("containers") or []:
        if not isinstance(container, dict):
            continue
        if wanted is not None and container.get("name") not in wanted:
            continue
        current = [item for item in container.get("env") or [] if isinstance(item, dict)]
        ours = {item["name"] for item in items}
        if override:
            current = [item for item in current if item.get("name") not in ours]
            added = items
        else:
            defined = {item.get("name") for item in current}
            added = [item for item in items if item["name"] not in defined]
        container["env"] = current + deep_copy(added)
