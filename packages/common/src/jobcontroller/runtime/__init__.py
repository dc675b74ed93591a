"""The asyncio machinery of an operator: API client, informers, work queue, expectations,
leader election, events, metrics, the HTTP server, logging and the operator runner.

Nothing here knows about jobs; :mod:`jobcontroller.controller` joins it to the pure core.
"""

from jobcontroller.runtime.events import EventRecorder
from jobcontroller.runtime.expectations import Expectations
from jobcontroller.runtime.flags import Settings
from jobcontroller.runtime.informer import Informer, strip_managed_fields
from jobcontroller.runtime.kube import ApiError, KubeApi, Resource
from jobcontroller.runtime.leader import LeaderElector, LeadershipLost
from jobcontroller.runtime.logging import configure_logging
from jobcontroller.runtime.manager import Controller, Manager
from jobcontroller.runtime.metrics import Metrics
from jobcontroller.runtime.projection import project_pod, project_service
from jobcontroller.runtime.runner import run_operator
from jobcontroller.runtime.workqueue import QueueShutDown, WorkQueue

__all__ = [
    "ApiError",
    "Controller",
    "EventRecorder",
    "Expectations",
    "Informer",
    "KubeApi",
    "LeaderElector",
    "LeadershipLost",
    "Manager",
    "Metrics",
    "QueueShutDown",
    "Resource",
    "Settings",
    "WorkQueue",
    "configure_logging",
    "project_pod",
    "project_service",
    "run_operator",
    "strip_managed_fields",
]
