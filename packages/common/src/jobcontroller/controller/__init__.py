"""``JobController``, the base class a framework operator subclasses, and its parts:

- ``reconciler``: :class:`Reconciler`, the loop every kind shares: wiring, and each
  reconcile's watch -> gate -> plan -> execute -> status;
- ``base``: :class:`JobController`, the reconciler of the v1 kinds (the pure planner and the
  framework hooks);
- ``hooks``: the hooks a framework overrides, and their defaults;
- ``watch``: the informers, what their events mean (expectations, owner keys), the caches read;
- ``state``: what is remembered per job between reconciles, forgotten in one place;
- ``executor``: carrying a plan out (batched creations, deletions, create-failure tracking);
- ``adoption``: objects found in a creation's way that the caches do not show;
- ``status``: the status writer (PUT, our own write in the cache, coalescing);
- ``nodes``: NodeLost's node watch; ``podgroups``: PodGroup kinds and PriorityClasses;
- ``telemetry``: Events, logs and metrics.
"""

from jobcontroller.controller.base import JobController
from jobcontroller.controller.podgroups import pod_group_resource
from jobcontroller.controller.reconciler import Reconciler
from jobcontroller.controller.watch import LABEL_JOB_NAME

__all__ = ["LABEL_JOB_NAME", "JobController", "Reconciler", "pod_group_resource"]
