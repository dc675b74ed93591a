"""``training-operator run [flags]`` and ``python -m training_operator``.

The TFJob, PyTorchJob, XGBoostJob, MPIJob, PaddleJob and JAXJob controllers, and Kubeflow
Trainer v2's TrainJob controller, in one process and one event loop: one API client and its QPS
budget, one watch on pods and one on services for all of them, one metrics registry, one HTTP
server, one Lease. ``--enable-scheme`` picks the kinds, as the training-operator spells it
(repeated or comma-separated, case-insensitive; all by default).
Every framework's own flags are accepted (``--pytorch-init-container-*``...). The MPIJob served
is mpi-operator's ``kubeflow.org/v2beta1``.

TrainJobs run as JobSets: by default the TrainJob controller is started only where the JobSet
and Trainer CRDs are installed (a warning says when it is not); named in ``--enable-scheme`` it
is started regardless, and waits for them.
"""

from __future__ import annotations

import argparse
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any

from jobcontroller import (
    PlanConfig,
    Reconciler,
    Settings,
    add_job_flags,
    all_installed,
    enable_progress,
    lookup_crds,
    parse_settings,
    plan_config,
    run_job_operators,
)
from pytorch_operator.__main__ import add_flags as add_pytorch_flags

NAME = "training-operator"
TRAINJOB = "trainjob"

# Each framework's package is imported only when its kind is enabled: its API models and
# controller are most of what a kind costs at start (bench/bench_startup.py).


def _tfjob(config: PlanConfig, settings: Settings) -> Reconciler[Any]:
    from tf_operator.controller import TFJobController

    return TFJobController(config=config)


def _pytorchjob(config: PlanConfig, settings: Settings) -> Reconciler[Any]:
    from pytorch_operator.__main__ import build_controller

    return build_controller(config, settings)


def _xgboostjob(config: PlanConfig, settings: Settings) -> Reconciler[Any]:
    from xgboost_operator.controller import XGBoostJobController

    return XGBoostJobController(config=config)


def _mpijob(config: PlanConfig, settings: Settings) -> Reconciler[Any]:
    from mpi_operator.controller import MPIJobController

    return MPIJobController(config=config)


def _paddlejob(config: PlanConfig, settings: Settings) -> Reconciler[Any]:
    from paddle_operator.controller import PaddleJobController

    return PaddleJobController(config=config)


def _jaxjob(config: PlanConfig, settings: Settings) -> Reconciler[Any]:
    from jax_operator.controller import JAXJobController

    return JAXJobController(config=config)


def _trainjob(
    config: PlanConfig, settings: Settings, pod_groups: frozenset[str] = frozenset()
) -> Reconciler[Any]:
    from trainer_operator.controller import TrainJobController

    return TrainJobController(config=config, pod_groups=pod_groups)


#: TrainJobController.required_crds, spelled out so that deciding whether to serve TrainJobs
#: does not import the trainer operator (its API models, JobSet's, its planner) where it is not
#: served; a unit test keeps the two equal.
TRAINJOB_CRDS = (
    "jobsets.jobset.x-k8s.io",
    "trainjobs.trainer.kubeflow.org",
    "trainingruntimes.trainer.kubeflow.org",
    "clustertrainingruntimes.trainer.kubeflow.org",
)
#: trainer_operator.podgroups.POD_GROUP_CRDS's CRDs, spelled out for the same reason (a unit
#: test keeps them equal too).
POD_GROUP_CRDS = ("podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh")


SCHEMES: dict[str, Callable[[PlanConfig, Settings], Reconciler[Any]]] = {
    "tfjob": _tfjob,
    "pytorchjob": _pytorchjob,
    "xgboostjob": _xgboostjob,
    "mpijob": _mpijob,
    "paddlejob": _paddlejob,
    "jaxjob": _jaxjob,
    TRAINJOB: _trainjob,
}


def installed_pod_groups(
    settings: Settings, answers: Mapping[str, bool | None] | None = None
) -> frozenset[str]:
    """The PodGroup kinds whose CRDs are installed (imports the TrainJob controller)."""
    from trainer_operator.controller import installed_pod_groups as installed

    return installed(settings, answers)


def _schemes(text: str) -> list[str]:
    chosen = []
    for part in text.split(","):
        scheme = part.strip().lower()
        if not scheme:
            continue
        if scheme not in SCHEMES:
            raise argparse.ArgumentTypeError(
                f"unknown scheme {part.strip()!r}; choose from {', '.join(SCHEMES)}"
            )
        chosen.append(scheme)
    return chosen


def add_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--enable-scheme",
        action="append",
        type=_schemes,
        default=None,
        metavar="SCHEME[,SCHEME...]",
        help=f"job kinds to run: {', '.join(SCHEMES)}; repeat or separate with commas "
        "(case-insensitive); all when not given",
    )
    add_pytorch_flags(parser)


def enabled(settings: Settings) -> list[str]:
    """The schemes to run, in a stable order, without duplicates."""
    given = settings.optional_flag("enable_scheme", list) or []
    wanted = {scheme for group in given for scheme in group} if given else set(SCHEMES)
    return [scheme for scheme in SCHEMES if scheme in wanted]


def named(settings: Settings) -> bool:
    """Whether ``--enable-scheme`` chose the kinds (else all are served by default)."""
    return bool(settings.optional_flag("enable_scheme", list))


def build_controllers(argv: Sequence[str] = ()) -> list[Reconciler[Any]]:
    """The controllers ``training-operator run <argv>`` would run (every kind by default), for
    tools that need them without running them (the CRD generator, renderers)."""

    settings = parse_settings(name=NAME, argv=list(argv), add_flags=_flags)
    config = plan_config(settings)
    built = [SCHEMES[scheme](config, settings) for scheme in enabled(settings)]
    enable_progress(NAME, built, settings)
    return built


def _flags(parser: argparse.ArgumentParser) -> None:
    add_job_flags(parser)
    add_flags(parser)


#: What :func:`_ask` found: the settings, the TrainJob controller's CRDs asked for (none when
#: named) and the answers; None when nothing was to be asked.
_Asked = tuple[Settings, list[str], dict[str, bool | None]] | None


def _what_to_ask(argv: list[str]) -> tuple[Settings, list[str]] | None:
    """The settings and the TrainJob controller's CRDs to ask for (none when it is named);
    None when nothing is to be asked (TrainJobs not served, or manifests printed). Bad flags
    exit here, as ``run`` would."""
    if argv and argv[0] in ("crd", "manifests"):
        return None
    settings = parse_settings(name=NAME, argv=argv, add_flags=_flags)
    if TRAINJOB not in enabled(settings):
        return None
    return settings, [] if named(settings) else list(TRAINJOB_CRDS)


def _ask(what: tuple[Settings, list[str]] | None) -> _Asked:
    """The lookups: every CRD asked in one go, on one connection; the PodGroup CRDs only if
    the TrainJob controller's are all there (a cluster without JobSet answers in two GETs)."""
    if what is None:
        return None
    settings, ask = what
    return settings, ask, lookup_crds(settings, [*ask, *POD_GROUP_CRDS], needed=ask)


def _decide(asked: _Asked) -> tuple[bool, frozenset[str]]:
    """Whether to start the TrainJob controller (named, or by default where its CRDs are), and
    the PodGroup kinds it may own (their CRDs installed), from :func:`_ask`'s answers. Says
    nothing: :func:`main` warns when TrainJobs are not served."""
    if asked is None:
        return True, frozenset()
    settings, ask, answers = asked
    if ask and all_installed(answers, ask) is False:
        return False, frozenset()
    return True, installed_pod_groups(settings, answers)


def _trainjob_lookups(argv: list[str]) -> tuple[bool, frozenset[str]]:
    """:func:`_decide` on :func:`_ask`'s answers, at once."""
    return _decide(_ask(_what_to_ask(argv)))


def _lookups_meanwhile(argv: list[str]) -> Callable[[], tuple[bool, frozenset[str]]]:
    """:func:`_ask` on a thread of its own, started now (the flags are parsed here); the
    returned function waits for its answers and decides (:func:`_decide`, on the caller's
    thread: it may import the TrainJob controller). The lookups wait on the API server (a TLS
    handshake and a GET or more, each a round trip) while the main thread connects, serves its
    probes and builds the other kinds' controllers: about 80 ms of a start on this machine,
    most of them waiting, that came before anything else. A daemon: an operator that exits
    first (a signal, a fatal error) does not wait for it."""
    what = _what_to_ask(argv)  # here: bad flags are said once, by this thread
    if what is None:
        return lambda: (True, frozenset())
    asked: Future[_Asked] = Future()

    def look() -> None:
        try:
            asked.set_result(_ask(what))
        except BaseException as exc:  # lookup_crds answers None for what it could not ask
            asked.set_exception(exc)

    threading.Thread(target=look, name="crd-lookups", daemon=True).start()
    return lambda: _decide(asked.result())


def _warn_not_served() -> None:
    # Imported here, not at the top (where it would come before jobcontroller, which imports
    # it with rich hidden: jobcontroller/__init__.py).
    import structlog

    structlog.get_logger(__name__).warning(
        "TrainJobs are not served: the JobSet or Trainer CRDs are not installed "
        "(name trainjob in --enable-scheme to serve them regardless)",
        crds=list(TRAINJOB_CRDS),
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    lookups = _lookups_meanwhile(args)

    def build(config: PlanConfig, settings: Settings) -> list[Reconciler[Any]]:
        built = [
            SCHEMES[scheme](config, settings) for scheme in enabled(settings) if scheme != TRAINJOB
        ]
        if TRAINJOB in enabled(settings):
            # The other kinds are built: now the TrainJob controller needs the answers.
            serve, pod_groups = lookups()
            if serve:
                built.append(_trainjob(config, settings, pod_groups))
            else:
                _warn_not_served()
        return built

    return run_job_operators(name=NAME, controllers=build, argv=args, add_flags=add_flags)


if __name__ == "__main__":
    sys.exit(main())
