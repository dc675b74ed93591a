"""Command-line flags shared by every operator, parsed into :class:`Settings`.

Flag names follow the anchors where they exist (training-operator's ``--namespace``,
``--leader-elect``, ``--leader-election-id``, ``--kube-api-qps``/``--kube-api-burst``), and
the anchors' spellings of the worker count (``--controller-threads``, mpi-operator's
``--threadiness``) are accepted as aliases of ``--workers`` so existing manifests keep working.
A framework adds its own flags through the ``add_flags`` hook; their values land in
:attr:`Settings.extras` under argparse's ``dest`` names.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from msgspec import Struct, field
from typing_extensions import override

from jobcontroller.runtime.logging import LOG_LEVELS, LogFormat

#: Where Kubernetes mounts the pod's namespace for its service account.
SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

AddFlags = Callable[[argparse.ArgumentParser], None]

T = TypeVar("T")


class Settings(Struct, frozen=True, kw_only=True):
    """Process settings of one operator, as given on its command line."""

    kubeconfig: str | None = None
    """Path of a kubeconfig. None: in-cluster config inside a pod, else $KUBECONFIG or
    ~/.kube/config."""

    namespace: str = ""
    """Namespace to watch; empty means all namespaces. Defaults to $KUBEFLOW_NAMESPACE like
    the training-operator."""

    workers: int = 4
    """Concurrent reconciles per controller. The anchors default to 1 OS thread; our workers
    are asyncio tasks, so a few cost little, and the work queue never hands one key to two
    workers, so more workers only add parallelism across different jobs. 4 keeps a 20 QPS
    client busy without letting one slow job hold up all others."""

    kube_api_qps: float = 20.0
    """Sustained client-side request rate to the API server (controller-runtime's default)."""

    kube_api_burst: int = 30
    """Requests allowed above the sustained rate in a burst."""

    bind_address: str = "0.0.0.0"
    """Address the metrics and probe server listens on."""

    metrics_port: int = 8080
    """Port of /metrics (0: ephemeral, for tests). May equal health_port."""

    health_port: int = 8081
    """Port of /healthz and /readyz (0: ephemeral, for tests)."""

    leader_elect: bool = False
    """Run leader election so only one replica reconciles; the others keep warm caches."""

    leader_election_namespace: str = "kubeflow"
    """Namespace of the Lease. Defaults to the pod's own namespace when running in a pod."""

    leader_election_id: str = ""
    """Name of the Lease. Defaults to the operator's name."""

    leader_election_lease_duration: float = 15.0
    """Seconds a non-leader waits after the lease last changed before taking it over."""

    leader_election_renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before giving up (and exiting). Must be less
    than the lease duration so workers stop before anyone else may take over."""

    leader_election_retry_period: float = 2.0
    """Seconds between acquire and renew attempts."""

    drain_timeout: float = 15.0
    """Seconds a SIGTERM waits for in-flight reconciles before cancelling them. With the Event
    flush and the Lease release after it, the process exits well within a Deployment's default
    30 s grace period (keep it about half of terminationGracePeriodSeconds)."""

    log_format: LogFormat = "json"
    """``json`` (one object per line, for collectors) or ``console`` (for people)."""

    log_level: str = "info"
    """One of debug, info, warning, error, critical."""

    extras: Mapping[str, Any] = field(default_factory=dict)
    """Values of the flags a framework added through ``add_flags``, keyed by argparse dest;
    read them typed with :meth:`flag` and :meth:`optional_flag`."""

    def flag(self, name: str, kind: type[T], default: T | None = None) -> T:
        """The value of the flag with argparse dest ``name`` that ``add_flags`` added, checked
        to be a ``kind``: a misspelt name or a value of another type is an error at startup
        that names the flag, not a cast that hides it. ``default`` when no such flag was added
        (None: that is an error too)."""
        if name not in self.extras:
            if default is None:
                raise KeyError(f"no flag with dest {name!r} was added (add_flags)")
            return default
        value = self.extras[name]
        if not isinstance(value, kind):
            raise TypeError(f"flag {name!r} is a {type(value).__name__}, not a {kind.__name__}")
        return value

    def optional_flag(self, name: str, kind: type[T]) -> T | None:
        """Like :meth:`flag` for a flag whose value may be None (unset, or its default)."""
        value = self.extras.get(name)
        if value is not None and not isinstance(value, kind):
            raise TypeError(f"flag {name!r} is a {type(value).__name__}, not a {kind.__name__}")
        return value


def default_leader_election_namespace() -> str:
    """The pod's namespace from its service-account mount, else ``kubeflow``."""
    try:
        ns = SERVICE_ACCOUNT_NAMESPACE_FILE.read_text().strip()
    except OSError:
        return "kubeflow"
    return ns or "kubeflow"


def default_settings(*, name: str, environ: Mapping[str, str] | None = None) -> Settings:
    """The settings of operator ``name`` when no flag is given."""
    env = os.environ if environ is None else environ
    return Settings(
        namespace=env.get("KUBEFLOW_NAMESPACE", ""),
        leader_election_id=name,
        leader_election_namespace=default_leader_election_namespace(),
    )


def build_parser(
    *, name: str, add_flags: AddFlags | None = None, defaults: Settings | None = None
) -> argparse.ArgumentParser:
    """The argument parser of operator ``name``, including the framework's own flags."""
    d = defaults if defaults is not None else default_settings(name=name)
    parser = argparse.ArgumentParser(
        prog=name,
        usage=f"{name} [run] [options]",
        description=f"Run the {name} Kubernetes operator.",
        formatter_class=_HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=version_string(name))
    api = parser.add_argument_group("API access")
    api.add_argument(
        "--kubeconfig",
        default=d.kubeconfig,
        help="path of a kubeconfig (default: the in-cluster config in a pod, else "
        "$KUBECONFIG, else ~/.kube/config)",
    )
    api.add_argument("--kube-api-qps", type=float, default=d.kube_api_qps, help="client QPS")
    api.add_argument("--kube-api-burst", type=int, default=d.kube_api_burst, help="client burst")

    ctl = parser.add_argument_group("controllers")
    ctl.add_argument(
        "--namespace",
        default=d.namespace,
        help="namespace to watch; empty means all (default: $KUBEFLOW_NAMESPACE, else all)",
    )
    ctl.add_argument(
        "--workers",
        "--controller-threads",
        "--threadiness",
        dest="workers",
        type=_positive_int,
        default=d.workers,
        help="concurrent reconciles per controller",
    )

    ctl.add_argument(
        "--drain-timeout",
        type=_positive_float,
        default=d.drain_timeout,
        help="seconds a SIGTERM waits for in-flight reconciles before cancelling them",
    )

    srv = parser.add_argument_group("HTTP server")
    srv.add_argument("--bind-address", default=d.bind_address, help="listen address")
    srv.add_argument("--metrics-port", type=_port, default=d.metrics_port, help="/metrics port")
    srv.add_argument(
        "--health-port", type=_port, default=d.health_port, help="/healthz and /readyz port"
    )
    # The training-operator's spellings, so an existing Deployment's args work: "[host]:port".
    srv.add_argument(
        "--metrics-bind-address",
        type=_host_port,
        default=None,
        help="[host]:port of /metrics (the training-operator's flag; sets --metrics-port and, "
        "with a host, --bind-address)",
    )
    srv.add_argument(
        "--health-probe-bind-address",
        type=_host_port,
        default=None,
        help="[host]:port of /healthz and /readyz (the training-operator's flag; sets "
        "--health-port and, with a host, --bind-address)",
    )

    le = parser.add_argument_group("leader election")
    le.add_argument(
        "--leader-elect", action="store_true", default=d.leader_elect, help="use a Lease"
    )
    le.add_argument(
        "--leader-election-namespace",
        default=d.leader_election_namespace,
        help=f"namespace of the Lease (default: the pod's own, else kubeflow; here "
        f"{d.leader_election_namespace})",
    )
    le.add_argument("--leader-election-id", default=d.leader_election_id, help="Lease name")
    le.add_argument(
        "--leader-election-lease-duration",
        type=_positive_float,
        default=d.leader_election_lease_duration,
        help="seconds a Lease holds without renewal",
    )
    le.add_argument(
        "--leader-election-renew-deadline",
        type=_positive_float,
        default=d.leader_election_renew_deadline,
        help="seconds the leader keeps trying to renew before it gives up leading",
    )
    le.add_argument(
        "--leader-election-retry-period",
        type=_positive_float,
        default=d.leader_election_retry_period,
        help="seconds between attempts to acquire or renew the Lease",
    )

    log = parser.add_argument_group("logging")
    log.add_argument(
        "--log-format",
        choices=["json", "console"],
        default=d.log_format,
        help="json: one object per line for log stacks; console: for people",
    )
    log.add_argument(
        "--log-level",
        choices=LOG_LEVELS,
        type=str.lower,
        default=d.log_level,
        help="the least severe level written",
    )

    if add_flags is not None:
        add_flags(parser)
    return parser


def parse_settings(
    *,
    name: str,
    argv: Sequence[str] | None = None,
    add_flags: AddFlags | None = None,
    environ: Mapping[str, str] | None = None,
) -> Settings:
    """Parse ``argv`` (``[run] [flags]``; None: ``sys.argv[1:]``) into :class:`Settings`.

    Exits with status 2 and a usage message on bad flags, like any argparse program.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "run":
        args = args[1:]
    parser = build_parser(
        name=name, add_flags=add_flags, defaults=default_settings(name=name, environ=environ)
    )
    parsed = vars(parser.parse_args(args))
    _apply_bind_addresses(parser, parsed)

    own = set(Settings.__struct_fields__) - {"extras"}
    settings = Settings(
        **{k: v for k, v in parsed.items() if k in own},
        extras={k: v for k, v in parsed.items() if k not in own},
    )
    lease, renew, retry = (
        settings.leader_election_lease_duration,
        settings.leader_election_renew_deadline,
        settings.leader_election_retry_period,
    )
    if not (lease > renew and renew > 1.2 * retry):
        parser.error(
            "leader election needs lease duration > renew deadline > 1.2 * retry period "
            f"(got {lease:g} > {renew:g} > {retry:g})"
        )
    return settings


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows a flag's default only when there is one to show and its help names none."""

    @override
    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if "default" in text or default is None or default is False or default == "":
            return text
        if default == argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)


def version_string(name: str) -> str:
    """``<name> <version>`` of the operator's distribution, with the base library's."""

    def version(dist: str) -> str:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return "unknown"

    return f"{name} {version(name)} (jobcontroller {version('jobcontroller')})"


def _host_port(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep:
        raise argparse.ArgumentTypeError(f"expected [host]:port, got {text!r}")
    return host.strip("[]"), _port(port)


def _apply_bind_addresses(parser: argparse.ArgumentParser, parsed: dict[str, Any]) -> None:
    """Fold the training-operator's ``--metrics-bind-address`` and
    ``--health-probe-bind-address`` into our port and bind-address settings (both servers
    share one listen address)."""
    hosts = set()
    for flag, port_key in (
        ("metrics_bind_address", "metrics_port"),
        ("health_probe_bind_address", "health_port"),
    ):
        value = parsed.pop(flag, None)
        if value is None:
            continue
        host, port = value
        parsed[port_key] = port
        if host:
            hosts.add(host)
    if len(hosts) > 1:
        parser.error(
            "--metrics-bind-address and --health-probe-bind-address name different hosts; "
            "both servers listen on one --bind-address"
        )
    if hosts:
        parsed["bind_address"] = hosts.pop()


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _port(text: str) -> int:
    value = int(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number: {value}")
    return value
