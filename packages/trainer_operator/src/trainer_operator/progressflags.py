"""The ``--trainjob-status-*`` flags: the training-progress endpoint, on by default (upstream
keeps it behind the alpha ``TrainJobStatus`` feature gate, off by default)."""

from __future__ import annotations

import argparse
import os

from jobcontroller import Settings
from trainer_operator.progressserver import DEFAULT_MIN_INTERVAL, DEFAULT_PORT, ProgressSettings

__all__ = ["add_progress_flags", "progress_settings"]


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


def add_progress_flags(parser: argparse.ArgumentParser, *, service: str) -> None:
    """``service``: the default Service name in front of the operator (its own name)."""
    group = parser.add_argument_group("TrainJob progress (status.trainerStatus)")
    group.add_argument(
        "--trainjob-status-port",
        type=_port,
        default=DEFAULT_PORT,
        help="HTTPS port where trainer pods report progress; 0 turns the endpoint and the "
        f"pods' env off (default {DEFAULT_PORT})",
    )
    group.add_argument(
        "--trainjob-status-service",
        default=service,
        help="the Service in front of the operator's pods, in $POD_NAMESPACE: the pods' URL "
        f"and the certificate's names (default {service})",
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
        help="at most one status write per TrainJob per this many seconds; reports in between "
        f"are coalesced, the last one kept (default {DEFAULT_MIN_INTERVAL:g})",
    )


def progress_settings(settings: Settings) -> ProgressSettings | None:
    """The endpoint's settings from the flags; None when turned off."""
    port = settings.flag("trainjob_status_port", int, DEFAULT_PORT)
    if port == 0:
        return None
    return ProgressSettings(
        port=port,
        bind_address=settings.bind_address,
        namespace=os.environ.get("POD_NAMESPACE") or "kubeflow",
        service=settings.flag("trainjob_status_service", str, "training-operator"),
        url=settings.flag("trainjob_status_url", str, ""),
        min_interval=settings.flag("trainjob_status_min_interval", float, DEFAULT_MIN_INTERVAL),
        qps=settings.flag("trainjob_status_qps", float, 5.0),
        burst=settings.flag("trainjob_status_burst", int, 10),
    )
