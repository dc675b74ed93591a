"""``training-operator run [flags]`` and ``python -m training_operator``.

The TFJob, PyTorchJob, XGBoostJob, MPIJob, PaddleJob and JAXJob controllers in one process and
one event loop: one API client and its QPS budget, one watch on pods and one on services for
all of them, one metrics registry, one HTTP server, one Lease. ``--enable-scheme`` picks the
kinds, as the training-operator spells it (repeated or comma-separated, case-insensitive; all by
default).
Every framework's own flags are accepted (``--pytorch-init-container-*``...). The MPIJob served
is mpi-operator's ``kubeflow.org/v2beta1``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from jax_operator.controller import JAXJobController
from jobcontroller import (
    JobController,
    PlanConfig,
    Settings,
    add_job_flags,
    parse_settings,
    plan_config,
    run_job_operators,
)
from mpi_operator.controller import MPIJobController
from paddle_operator.controller import PaddleJobController
from pytorch_operator.__main__ import add_flags as add_pytorch_flags
from pytorch_operator.__main__ import build_controller as pytorch_controller
from tf_operator.controller import TFJobController
from xgboost_operator.controller import XGBoostJobController

NAME = "training-operator"

SCHEMES: dict[str, Callable[[PlanConfig, Settings], JobController[Any]]] = {
    "tfjob": lambda config, settings: TFJobController(config=config),
    "pytorchjob": pytorch_controller,
    "xgboostjob": lambda config, settings: XGBoostJobController(config=config),
    "mpijob": lambda config, settings: MPIJobController(config=config),
    "paddlejob": lambda config, settings: PaddleJobController(config=config),
    "jaxjob": lambda config, settings: JAXJobController(config=config),
}


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


def build_controllers(argv: Sequence[str] = ()) -> list[JobController[Any]]:
    """The controllers ``training-operator run <argv>`` would run (every kind by default), for
    tools that need them without running them (the CRD generator, renderers)."""

    def flags(parser: argparse.ArgumentParser) -> None:
        add_job_flags(parser)
        add_flags(parser)

    settings = parse_settings(name=NAME, argv=list(argv), add_flags=flags)
    config = plan_config(settings)
    return [SCHEMES[scheme](config, settings) for scheme in enabled(settings)]


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operators(
        name=NAME,
        controllers=lambda config, settings: [
            SCHEMES[scheme](config, settings) for scheme in enabled(settings)
        ],
        argv=argv,
        add_flags=add_flags,
    )


if __name__ == "__main__":
    sys.exit(main())
