"""``JobController``: the base class a v1 framework operator (TFJob, PyTorchJob, MPIJob...)
subclasses. The reconcile loop is the :class:`~jobcontroller.controller.reconciler.Reconciler`'s;
this class plans with :func:`jobcontroller.core.planner.plan` and the framework's hooks.

A framework subclass sets the class attributes (``model``, ``framework_name``,
``controller_name``) and overrides, marked ``@override``, the few hooks that differ from the
defaults (the planner's in ``FrameworkOf``, core/types.py; the runtime's in controller/hooks.py):
usually ``set_defaults``, ``validate``, ``set_cluster_spec`` and ``update_status``. Operators
that own more kinds of objects list them in ``owned_resources`` and declare them in
``children`` (the base keeps them: core/children.py), or act on them in ``extra_objects``.
"""

from __future__ import annotations

import datetime as dt

from typing_extensions import override

from jobcontroller.controller.hooks import ControllerHooks
from jobcontroller.controller.reconciler import Reconciler
from jobcontroller.core.planner import plan
from jobcontroller.core.types import JobT, Obj, Observed, Plan, PlanConfig

__all__ = ["JobController"]


class JobController(ControllerHooks[JobT], Reconciler[JobT]):
    """Reconciles one v1 job kind (see :class:`Reconciler`), parametrised by the framework's
    job model (``class TFJobController(JobController[TFJob])``), so every hook receives that
    model, already defaulted: no casts."""

    progress_extension = True

    @override
    def plan_job(
        self, raw: Obj, observed: Observed, *, now: dt.datetime, config: PlanConfig
    ) -> Plan:
        return plan(self, raw, observed, now=now, config=config)
