"""Setting environment variables in a pod template, for a framework's ``set_cluster_spec``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["set_env"]


def set_env(
    template: dict[str, Any],
    env: Mapping[str, str] | Iterable[tuple[str, str]],
    *,
    containers: str | Iterable[str] | None = None,
    override: bool = False,
) -> None:
    """Add ``env`` (in order) to the containers of a pod template, in place.

    ``containers``: a container name, several, or None for every container. A variable the
    container already defines is left as the user set it, unless ``override`` (then the
    operator's value replaces it where it stands). Init containers are never touched.
    """
    pairs = list(env.items()) if isinstance(env, Mapping) else list(env)
    names = {containers} if isinstance(containers, str) else containers
    wanted = None if names is None else set(names)
    for container in (template.get("spec") or {}).get("containers") or []:
        if not isinstance(container, dict):
            continue
        if wanted is not None and container.get("name") not in wanted:
            continue
        current = container.get("env")
        if not isinstance(current, list):
            current = container["env"] = []
        index = {
            item.get("name"): i
            for i, item in enumerate(current)
            if isinstance(item, dict) and item.get("name")
        }
        for name, value in pairs:
            if name not in index:
                index[name] = len(current)
                current.append({"name": name, "value": value})
            elif override:
                current[index[name]] = {"name": name, "value": value}
