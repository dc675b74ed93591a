"""The ``--trainjob-status-*`` flags: the training-progress endpoint, on by default (upstream
keeps it behind the alpha ``TrainJobStatus`` feature gate, off by default), for every job
operator: one endpoint per process serves the TrainJob and the v1 kinds (the flags keep the
names they had when it served TrainJobs alone). ``--no-v1-job-progress`` leaves the v1 kinds'
pods as upstream's v1 makes them while TrainJobs keep reporting."""

from __future__ import annotations

import argparse
import os

from msgspec import Struct

from jobcontroller.runtime.flags import Settings

__all__ = [
    "DEFAULT_MIN_INTERVAL",
    "DEFAULT_PORT",
    "ProgressSettings",
    "add_progress_flags",
    "progress_settings",
    "v1_progress",
]

DEFAULT_PORT = 10443
"""Upstream's ``statusServer.port`` default."""
DEFAULT_MIN_INTERVAL = 5.0
"""Seconds between two status writes of one job: upstream's SDK throttles its reports to
one per 5 s on the client side; this holds whatever a pod sends."""


class ProgressSettings(Struct, frozen=True):
    """Where and how the endpoint serves (``--trainjob-status-*`` flags)."""

    port: int = DEFAULT_PORT
    """The HTTPS port; 0 asks the OS for one (tests)."""
    bind_address: str = "0.0.0.0"
    namespace: str = "kubeflow"
    """The operator's namespace: the Secret of its certificate, and the Service's."""
    service: str = "training-operator"
    """The Service in front of the operator's pods: the certificate's host names."""
    url: str = ""
    """The base URL the pods are given; empty: ``https://<service>.<namespace>.svc:<port>``."""
    min_interval: float = DEFAULT_MIN_INTERVAL
    qps: float = 5.0
    burst: int = 10
    extra_hosts: tuple[str, ...] = ()
    """More names (or IPs) for the certificate (``localhost`` for a test)."""

    def base_url(self, port: int | None = None) -> str:
        """The pods' base URL; ``port``: the bound one, when the OS chose it."""
        where = port or self.port
        return self.url or f"https://{self.service}.{self.namespace}.svc:{where}"

    @property
    def secret_name(self) -> str:
        return f"{self.service}-trainjob-status-tls"

    @property
    def hosts(self) -> list[str]:
        s, ns = self.service, self.namespace
        return [s, f"{s}.{ns}", f"{s}.{ns}.svc", f"{s}.{ns}.svc.cluster.local", *self.extra_hosts]


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 0 and 65535, got {value}")
    return value


def _interval(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def add_progress_flags(parser: argparse.ArgumentParser) -> None:
    """The endpoint's flags (``add_job_flags`` adds them to every job operator)."""
    group = parser.add_argument_group("training progress (status.trainerStatus)")
    group.add_argument(
        "--trainjob-status-port",
        type=_port,
        default=DEFAULT_PORT,
        help="HTTPS port where training pods report progress; 0 turns the endpoint and the "
        f"pods' env off, for every kind (default {DEFAULT_PORT})",
    )
    group.add_argument(
        "--trainjob-status-service",
        default="",
        help="the Service in front of the operator's pods, in $POD_NAMESPACE: the pods' URL "
        "and the certificate's names (default: the operator's name)",
    )
    group.add_argument(
        "--trainjob-status-url",
        default="",
        help="the base URL the pods are given instead (https://HOST:PORT)",
    )
    group.add_argument(
        "--trainjob-status-qps",
        type=_interval,
        default=5.0,
        help="QPS of the endpoint's own API client (its writes, token reviews and pod reads; "
        "upstream's statusServer.qps; default 5)",
    )
    group.add_argument(
        "--trainjob-status-burst",
        type=_port,
        default=10,
        help="burst of that client (upstream's statusServer.burst; default 10)",
    )
    group.add_argument(
        "--trainjob-status-min-interval",
        type=_interval,
        default=DEFAULT_MIN_INTERVAL,
        metavar="SECONDS",
        help="at most one status write per job per this many seconds; reports in between "
        f"are coalesced, the last one kept (default {DEFAULT_MIN_INTERVAL:g})",
    )
    group.add_argument(
        "--v1-job-progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="give the v1 kinds' pods (TFJob, PyTorchJob, MPIJob, XGBoostJob, PaddleJob, "
        "JAXJob) the progress env and serve their reports, an extension of upstream's v1 "
        "(default on; --no-v1-job-progress: their pods as upstream's v1 makes them)",
    )


def v1_progress(settings: Settings) -> bool:
    """Whether the v1 kinds report progress: the endpoint on and not opted out."""
    return settings.flag("trainjob_status_port", int, DEFAULT_PORT) != 0 and settings.flag(
        "v1_job_progress", bool, True
    )


def progress_settings(settings: Settings, *, name: str) -> ProgressSettings | None:
    """The endpoint's settings from the flags; None when turned off. ``name``: the
    operator's, the Service's by default."""
    port = settings.flag("trainjob_status_port", int, DEFAULT_PORT)
    if port == 0:
        return None
    return ProgressSettings(
        port=port,
        bind_address=settings.bind_address,
        namespace=os.environ.get("POD_NAMESPACE") or "kubeflow",
        service=settings.flag("trainjob_status_service", str, "") or name,
        url=settings.flag("trainjob_status_url", str, ""),
        min_interval=settings.flag("trainjob_status_min_interval", float, DEFAULT_MIN_INTERVAL),
        qps=settings.flag("trainjob_status_qps", float, 5.0),
        burst=settings.flag("trainjob_status_burst", int, 10),
    )
