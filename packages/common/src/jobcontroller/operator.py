"""``run_job_operator``: the whole ``main`` of a framework operator built on JobController.

It adds the flags every job operator shares to the runtime's (``--gang-scheduler-name``, and
``--cluster-domain`` defaulting to ``$CUSTOM_CLUSTER_DOMAIN``) and runs the controller.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import structlog

from jobcontroller.controller import Reconciler, pod_group_resource
from jobcontroller.core.types import PlanConfig
from jobcontroller.crashguard import CrashGuard
from jobcontroller.manifests import DEFAULT_IMAGE, crds, operator_manifests, to_yaml
from jobcontroller.runtime.flags import Settings, parse_settings
from jobcontroller.runtime.kube import CRDS, ApiError, KubeApi
from jobcontroller.runtime.manager import Controller, Manager
from jobcontroller.runtime.progressflags import add_progress_flags, progress_settings, v1_progress
from jobcontroller.runtime.runner import run_operator

__all__ = [
    "add_job_flags",
    "all_installed",
    "crash_guard",
    "crds_installed",
    "enable_progress",
    "lookup_crds",
    "plan_config",
    "pod_group_crd_installed",
    "run_job_operator",
    "run_job_operators",
]

log = structlog.get_logger(__name__)


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
    defaults = PlanConfig()
    parser.add_argument(
        "--max-pods-per-job",
        type=_non_negative_int,
        default=defaults.max_pods_per_job,
        help="a job asking for more pods fails validation with a condition saying so, before "
        "anything is built; 0 means no limit (default 100000, the largest Indexed Job "
        "Kubernetes accepts)",
    )
    parser.add_argument(
        "--max-object-bytes",
        type=_non_negative_int,
        default=defaults.max_object_bytes,
        help="the largest object the API server stores (etcd's --max-request-bytes): a job "
        "whose pods would be larger (their cluster env lists every replica) fails validation "
        "before any pod is created; 0 turns the check off (default 1572864, 1.5 MiB)",
    )
    parser.add_argument(
        "--max-bytes-per-reconcile",
        type=_non_negative_int,
        default=defaults.max_bytes_per_reconcile,
        help="estimated bytes of pod bodies one reconcile may plan: a job of big pods creates "
        "fewer per pass; 0 means no limit (default 16 MiB)",
    )
    parser.add_argument(
        "--max-writes-per-reconcile",
        type=_non_negative_int,
        default=defaults.max_writes_per_reconcile,
        help="pods and services one reconcile of a job may create or delete; the rest follows "
        "in later passes, so a huge job neither starves the others nor holds thousands of pod "
        "bodies in memory; 0 means no limit",
    )
    parser.add_argument(
        "--state-dir",
        default=None,
        metavar="DIR",
        help="where the crash-loop guard notes the jobs being worked on, so that a job the "
        "operator keeps dying on is failed (reason OperatorCrashed) instead of planned again; "
        "keep it on a volume that outlives the container (the Deployment mounts an emptyDir "
        "at /tmp); empty turns the guard off (default: <temp dir>/<operator>-state)",
    )
    parser.add_argument(
        "--node-lost-grace-period",
        type=_duration,
        default=defaults.node_lost_grace_seconds,
        metavar="DURATION",
        help="a pod whose node has not been Ready for this long (5m, 90s, 300), or whose node "
        "is gone, has failed with reason NodeLost: it is force-deleted and its replica's "
        "restart policy applies; 0 turns this off (default 5m)",
    )
    add_progress_flags(parser)


_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _duration(text: str) -> float:
    """Seconds from a Go-style duration (``5m``, ``1m30s``, ``90s``) or a plain number of
    seconds; not negative."""
    text = text.strip()
    try:
        value = float(text)
    except ValueError:
        parts = _DURATION.findall(text)
        if not parts or "".join(n + u for n, u in parts) != text:
            raise argparse.ArgumentTypeError(
                f"not a duration (like 5m, 90s or 300): {text!r}"
            ) from None
        value = sum(float(n) * _UNIT_SECONDS[u] for n, u in parts)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def _non_negative_int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def plan_config(settings: Settings, *, pod_group_available: bool | None = None) -> PlanConfig:
    """The planner's settings from the flags. ``pod_group_available`` None means: assume the
    PodGroup CRD of ``--gang-scheduler-name`` exists whenever the flag is set."""
    defaults = PlanConfig()
    gang = settings.flag("gang_scheduler_name", str, "")
    available = bool(gang) if pod_group_available is None else pod_group_available
    return PlanConfig(
        gang_scheduler_name=gang,
        pod_group_available=bool(gang) and available,
        cluster_domain=settings.flag("cluster_domain", str, ""),
        max_pods_per_job=settings.flag("max_pods_per_job", int, defaults.max_pods_per_job),
        max_object_bytes=settings.flag("max_object_bytes", int, defaults.max_object_bytes),
        max_bytes_per_reconcile=settings.flag(
            "max_bytes_per_reconcile", int, defaults.max_bytes_per_reconcile
        ),
        max_writes_per_reconcile=settings.flag(
            "max_writes_per_reconcile", int, defaults.max_writes_per_reconcile
        ),
        node_lost_grace_seconds=settings.flag(
            "node_lost_grace_period", float, defaults.node_lost_grace_seconds
        ),
    )


def enable_progress(name: str, controllers: Sequence[Reconciler[Any]], settings: Settings) -> None:
    """Serve training progress for the controllers the flags say (all by default; the v1
    kinds not with ``--no-v1-job-progress``), unless one was given its settings already."""
    served = progress_settings(settings, name=name)
    if served is None:
        return
    extension = v1_progress(settings)
    for controller in controllers:
        if controller.progress_settings is None and (
            extension or not controller.progress_extension
        ):
            controller.enable_progress(served)


def state_dir(name: str, settings: Settings) -> str:
    """``--state-dir``, or its default under the system's temporary directory."""
    given = settings.optional_flag("state_dir", str)
    if given is not None:
        return str(given)
    return os.path.join(tempfile.gettempdir(), f"{name}-state")


def crash_guard(name: str, settings: Settings) -> CrashGuard | None:
    """The process's crash-loop guard (one for all its controllers); None when turned off."""
    where = state_dir(name, settings)
    if not where:
        log.warning("the crash-loop guard is off (--state-dir is empty)")
        return None
    return CrashGuard.open(where)


async def pod_group_crd_installed(api: KubeApi, gang_scheduler_name: str) -> bool:
    """Whether the PodGroup CRD that ``gang_scheduler_name`` selects is installed."""
    resource = pod_group_resource(gang_scheduler_name)
    if resource is None:
        return False
    try:
        await _crd_exists(api, f"{resource.plural}.{resource.group}")
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def lookup_crds(
    settings: Settings, names: Sequence[str], *, needed: Collection[str] = ()
) -> dict[str, bool | None]:
    """Whether each CRD of ``names`` (``<plural>.<group>``) is installed; None for one the
    API server did not answer (or refused to say), or not asked: once one of ``needed`` is
    found missing, the ones after it are not asked (what needs them is not served; asked
    first, the TrainJob controller's CRDs spare a cluster without JobSet the PodGroup
    lookups: two GETs at start instead of nine). Asked once before the operator starts,
    all in one go: one event loop, one client, one connection, the GETs one after the other
    on it (each lookup had its own loop, client and TLS handshake; in parallel, each GET in
    flight would open a TLS connection of its own, to save a few ms of round trips), each
    for the CRD's metadata only, from the API server's cache (:func:`_crd_exists`). A
    refused GET (403) leaves only its CRD unanswered; a failed connection, a timeout or an API
    server still busy or failing (429, 5xx) after the client's retries leaves it and the ones
    not yet asked unanswered, and keeps the answers before."""

    async def ask(answers: dict[str, bool | None]) -> None:
        api = await KubeApi.from_config(
            # Each CRD takes at most two GETs: none waits for the rate limiter (but retries).
            kubeconfig=settings.kubeconfig,
            qps=5.0,
            burst=2 * len(names),
        )
        try:
            for at, name in enumerate(names):
                try:
                    await _crd_exists(api, name)
                except ApiError as exc:
                    if exc.status == 404:
                        answers[name] = False
                        if name in needed:
                            return
                        continue
                    if exc.status != 429 and exc.status < 500:  # refused: this one only
                        log.warning("could not check for a CRD", crd=name, error=str(exc))
                        continue
                    # Busy or failing after the client's retries: so would the rest be, each
                    # after its own retries.
                    log.warning("could not check for CRDs", crds=names[at:], error=str(exc))
                    return
                except Exception as exc:  # the connection, a timeout
                    log.warning("could not check for CRDs", crds=names[at:], error=repr(exc))
                    return
                answers[name] = True
        finally:
            await api.close()

    answers: dict[str, bool | None] = dict.fromkeys(names)
    if not names:
        return answers
    try:
        asyncio.run(ask(answers))
    except Exception as exc:  # no client (the kubeconfig), or closing it failed
        log.warning("could not check for CRDs", crds=list(names), error=repr(exc))
    return answers


async def _crd_exists(api: KubeApi, name: str) -> None:
    """Returns when the CRD ``name`` exists, raises :class:`ApiError` (404 when it does not).
    Its metadata from the API server's cache, a few ms where a read of a Trainer CRD from
    etcd takes 20 to 50 (the server decodes the whole object); a 404 from the cache is
    confirmed by a read (a CRD installed a moment ago may not be in it yet), which costs
    little for an object that is not there."""
    try:
        await api.get_metadata(CRDS, name, resource_version="0")
    except ApiError as exc:
        if exc.status != 404:
            raise
        await api.get_metadata(CRDS, name)


def all_installed(answers: Mapping[str, bool | None], names: Sequence[str]) -> bool | None:
    """Whether every CRD of ``names`` is installed by ``answers`` (:func:`lookup_crds`):
    False when one is not, None when one was not answered and none is missing."""
    got = [answers.get(name) for name in names]
    if False in got:
        return False
    return None if None in got else True


def crds_installed(settings: Settings, names: Sequence[str]) -> bool | None:
    """Whether every CRD of ``names`` (``<plural>.<group>``) is installed, asked once before
    the operator starts (a kind served by default only where its CRDs are: Trainer v2's
    TrainJob needs JobSet's); None when the API server could not say."""
    return all_installed(lookup_crds(settings, names), names)


def _detect_pod_groups(settings: Settings) -> bool | None:
    """Look the PodGroup CRD up once at startup (gang scheduling is used only when it is
    installed; without it the operator runs without gang scheduling and says so)."""
    gang = settings.flag("gang_scheduler_name", str, "")
    if not gang:
        return None

    async def check() -> bool:
        api = await KubeApi.from_config(kubeconfig=settings.kubeconfig, qps=5.0, burst=5)
        try:
            return await pod_group_crd_installed(api, gang)
        finally:
            await api.close()

    try:
        installed = asyncio.run(check())
    except Exception as exc:
        log.warning(
            "could not check for the PodGroup CRD; assuming it is installed", error=str(exc)
        )
        return None
    if not installed:
        resource = pod_group_resource(gang)
        assert resource is not None
        log.warning(
            "gang scheduling disabled: the PodGroup CRD is not installed",
            gang_scheduler_name=gang,
            crd=f"{resource.plural}.{resource.group}",
        )
    return installed


def run_job_operator(
    *,
    name: str,
    controller: Callable[[PlanConfig, Settings], Reconciler[Any]],
    argv: Sequence[str] | None = None,
    add_flags: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Run one job controller as operator ``name``; returns the exit status."""
    return run_job_operators(
        name=name,
        controllers=lambda config, settings: [controller(config, settings)],
        argv=argv,
        add_flags=add_flags,
    )


def _print_manifests(
    name: str,
    argv: list[str],
    *,
    controllers: Callable[[PlanConfig, Settings], Sequence[Reconciler[Any]]],
    add_flags: Callable[[argparse.ArgumentParser], None],
) -> int:
    """``<name> crd``: the CRDs; ``<name> manifests``: everything to install the operator."""
    parser = argparse.ArgumentParser(
        prog=f"{name} {argv[0]}",
        description=(
            "print the CustomResourceDefinitions of the job kinds served"
            if argv[0] == "crd"
            else "print the Namespace, CRDs, RBAC and Deployment that install this operator"
        ),
    )
    if argv[0] == "manifests":
        parser.add_argument("--namespace", default="kubeflow", help="the operator's namespace")
        parser.add_argument("--image", default=DEFAULT_IMAGE, help="the operator's image")
        parser.add_argument("--no-crds", action="store_true", help="leave the CRDs out")
    # Other flags are `run`'s, choosing what is served (training-operator's --enable-scheme).
    args, run_flags = parser.parse_known_args(argv[1:])
    settings = parse_settings(name=name, argv=run_flags, add_flags=add_flags)
    built = list(controllers(plan_config(settings), settings))
    enable_progress(name, built, settings)
    if argv[0] == "crd":
        sys.stdout.write(to_yaml(crds(built)))
    else:
        objects = operator_manifests(
            name,
            built,
            namespace=args.namespace,
            image=args.image,
            with_crds=not args.no_crds,
            args=run_flags,
        )
        sys.stdout.write(to_yaml(objects))
    return 0


def run_job_operators(
    *,
    name: str,
    controllers: Callable[[PlanConfig, Settings], Sequence[Reconciler[Any]]],
    argv: Sequence[str] | None = None,
    add_flags: Callable[[argparse.ArgumentParser], None] | None = None,
) -> int:
    """Run several job controllers in one process as operator ``name``: one event loop, one
    API client and its rate limit, shared informers (pods and services are watched once), one
    metrics registry, one HTTP server and one Lease. Returns the exit status."""

    def flags(parser: argparse.ArgumentParser) -> None:
        add_job_flags(parser)
        if add_flags is not None:
            add_flags(parser)

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("crd", "manifests"):
        return _print_manifests(name, argv, controllers=controllers, add_flags=flags)
    available = _detect_pod_groups(parse_settings(name=name, argv=argv, add_flags=flags))

    def build(settings: Settings, manager: Manager) -> list[Controller]:
        built = list(controllers(plan_config(settings, pod_group_available=available), settings))
        enable_progress(name, built, settings)
        guard = crash_guard(name, settings)
        for controller in built:
            controller.crash_guard = guard
        return list(built)

    return run_operator(name=name, argv=argv, build=build, add_flags=flags)
