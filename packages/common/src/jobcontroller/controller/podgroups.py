"""PodGroups (gang scheduling): which PodGroup kind a scheduler name selects, and the
cluster's PriorityClasses, by which a PodGroup's minResources counts replica types.

The planner builds the PodGroups (core/podgroup.py); the controller only knows their kind,
and gives the planner the PriorityClasses it read, as part of what it observed.
"""

from __future__ import annotations

from collections.abc import Mapping

from jobcontroller.core.types import Obj
from jobcontroller.runtime.informer import Informer
from jobcontroller.runtime.kube import Resource

__all__ = [
    "PLUGINS_POD_GROUPS",
    "PRIORITY_CLASSES",
    "VOLCANO_POD_GROUPS",
    "PriorityClasses",
    "pod_group_resource",
]

VOLCANO_POD_GROUPS = Resource("scheduling.volcano.sh", "v1beta1", "PodGroup", "podgroups")
PLUGINS_POD_GROUPS = Resource("scheduling.x-k8s.io", "v1alpha1", "PodGroup", "podgroups")

#: Read for gang scheduling: a PodGroup's minResources counts replica types by priority.
PRIORITY_CLASSES = Resource(
    "scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", namespaced=False
)


def pod_group_resource(gang_scheduler_name: str) -> Resource | None:
    """The PodGroup kind of ``--gang-scheduler-name``: Volcano's for ``volcano``,
    scheduler-plugins' for any other name, none when gang scheduling is off."""
    if not gang_scheduler_name:
        return None
    return VOLCANO_POD_GROUPS if gang_scheduler_name == "volcano" else PLUGINS_POD_GROUPS


class PriorityClasses:
    """PriorityClass name -> value, as the cluster has them (v1.9 reads them to fill a
    PodGroup's minResources highest priority first). A change wakes no job: it counts from the
    next PodGroup written, as in v1.9. Empty until :meth:`watch` (gang scheduling off)."""

    def __init__(self) -> None:
        self.values: Mapping[str, int] = {}

    def watch(self, informer: Informer) -> None:
        def refresh(*_: Obj) -> None:
            self.values = {
                str(pc["metadata"]["name"]): int(pc.get("value") or 0)
                for pc in informer.store.list()
            }

        informer.add_handlers(on_add=refresh, on_update=refresh, on_delete=refresh)
