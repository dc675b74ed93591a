"""``run_job_operator``: the whole ``main`` of a framework operator built on JobController.

It adds the flags every job operator shares to the runtime's (``--gang-scheduler-name``, and
``--cluster-domain`` defaulting to ``$CUSTOM_CLUSTER_DOMAIN``) and runs the controller.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence

from jobcontroller.controller import JobController
from jobcontroller.core.types import PlanConfig
from jobcontroller.runtime.flags import Settings
from jobcontroller.runtime.manager import Controller, Manager
from jobcontroller.runtime.runner import run_operator

__all__ = ["add_job_flags", "plan_config", "run_job_operator"]


def add_job_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--gang-scheduler-name",
        default="",
        help="volcano for Volcano PodGroups, any other name for scheduler-plugins PodGroups; "
        "empty (default) disables gang scheduling",
    )
    parser.add_argument(
        "--cluster-domain",
        default=os.environ.get("CUSTOM_CLUSTER_DOMAIN", ""),
        help="appended after .svc in the host names given to pods (env CUSTOM_CLUSTER_DOMAIN)",
    )


def plan_config(settings: Settings) -> PlanConfig:
    gang = str(settings.extras.get("gang_scheduler_name") or "")
    return PlanConfig(
        gang_scheduler_name=gang,
        pod_group_available=bool(gang),
        cluster_domain=str(settings.extras.get("cluster_domain") or ""),
    )


def run_job_operator(
    *,
    name: str,
    controller: Callable[[PlanConfig, Settings], JobController],
    argv: Sequence[str] | None = None,
    add_flags: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Run one job controller as operator ``name``; returns the exit status."""

    def flags(parser: argparse.ArgumentParser) -> None:
        add_job_flags(parser)
        if add_flags is not None:
            add_flags(parser)

    def build(settings: Settings, manager: Manager) -> list[Controller]:
        return [controller(plan_config(settings), settings)]

    return run_operator(
        name=name, argv=list(sys.argv[1:] if argv is None else argv), build=build, add_flags=flags
    )
