"""``training-operator run [flags]`` and ``python -m training_operator``.

The TFJob, PyTorchJob and MPIJob controllers in one process and one event loop: one API client
and its QPS budget, one watch on pods and one on services for all of them, one metrics
registry, one HTTP server, one Lease. ``--enable-scheme`` picks the kinds, as the
training-operator spells it (repeated or comma-separated, case-insensitive; all by default).
Every framework's own flags are accepted (``--pytorch-init-container-*``...). The MPIJob served
is mpi-operator's ``kubeflow.org/v2beta1``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

from jobcontroller import JobController, PlanConfig, Settings, run_job_operators
from mpi_operator.controller import MPIJobController
from pytorch_operator.__main__ import add_flags as add_pytorch_flags
from pytorch_operator.__main__ import build_controller as pytorch_controller
from tf_operator.controller import TFJobController

NAME = "training-operator"

SCHEMES: dict[str, Callable[[PlanConfig, Settings], JobController[Any]]] = {
    "tfjob": lambda config, settings: TFJobController(config=config),
    "pytorchjob": pytorch_controller,
    "mpijob": lambda config, settings: MPIJobController(config=config),
}
#: The training-operator v1.9's other kinds, which this project does not serve yet.
NOT_SERVED = ("xgboostjob", "paddlejob", "jaxjob")


def _schemes(text: str) -> list[str]:
    chosen = []
    for part in text.split(","):
        scheme = part.strip().lower()
        if not scheme:
            continue
        if scheme in NOT_SERVED:
            raise argparse.ArgumentTypeError(
                f"{scheme} is not served by this operator yet; it serves {', '.join(SCHEMES)}"
            )
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
    given = settings.extras.get("enable_scheme") or []
    wanted = {scheme for group in given for scheme in group} if given else set(SCHEMES)
    return [scheme for scheme in SCHEMES if scheme in wanted]


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
