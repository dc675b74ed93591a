"""Nodes, for NodeLost: each node's readiness, and the jobs to wake when it changes.

The node informer keeps only each node's name and Ready condition (``compact_node``). The pod
store gets an index on ``spec.nodeName`` (shared by the controllers of one manager), so a
node whose readiness changes, or that goes, wakes the jobs of the pods on it. A node's grace
period ending needs no event: the plan's timer fires (core/nodes.py decides).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from jobcontroller.core.nodes import node_state
from jobcontroller.core.types import NodeState, Obj
from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.store import Store

__all__ = ["NODE_NAME_INDEX", "NodeWatch", "pod_node_name"]

#: The pod store's index on ``spec.nodeName``: a node's change wakes the jobs of its pods.
NODE_NAME_INDEX = "node-name"


def pod_node_name(pod: Obj) -> list[str]:
    name = (pod.get("spec") or {}).get("nodeName")
    return [str(name)] if name else []


class NodeWatch:
    """Watches nodes through ``informer``; ``wake(pod)`` queues the job of a pod whose node
    changed."""

    def __init__(self, informer: Informer, *, pods: Store, wake: Callable[[Obj], None]) -> None:
        self._informer = informer
        with contextlib.suppress(ValueError):  # another controller added it to the shared store
            pods.add_index(NODE_NAME_INDEX, pod_node_name)

        def wake_pods(node: Obj) -> None:
            name = str((node.get("metadata") or {}).get("name") or "")
            for pod in pods.by_index(NODE_NAME_INDEX, name):
                wake(pod)

        def on_update(old: Obj, new: Obj) -> None:
            if node_state(old) != node_state(new):
                wake_pods(new)

        informer.add_handlers(on_update=on_update, on_delete=wake_pods)

    def lookup(self) -> Callable[[str], NodeState | None] | None:
        """``node(name)`` for the planner (None when no such node exists); None before the node
        cache has synced, when a missing node proves nothing."""
        if not self._informer.has_synced:
            return None
        store = self._informer.store

        def node(name: str) -> NodeState | None:
            found = store.get(None, name)
            return node_state(found) if found is not None else None

        return node
