"""``trainer-operator run [flags]`` and ``python -m trainer_operator``: the TrainJob controller
alone (``training-operator`` serves it beside the v1 kinds)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobcontroller import add_job_flags, parse_settings, run_job_operator
from trainer_operator.controller import TrainJobController, installed_pod_groups
from trainer_operator.progressflags import add_progress_flags, progress_settings

NAME = "trainer-operator"


def _progress_flags(parser: argparse.ArgumentParser) -> None:
    add_progress_flags(parser, service=NAME)


def _all_flags(parser: argparse.ArgumentParser) -> None:
    add_job_flags(parser)
    _progress_flags(parser)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    pod_groups: frozenset[str] = frozenset()
    if not args or args[0] not in ("crd", "manifests"):
        pod_groups = installed_pod_groups(
            parse_settings(name=NAME, argv=args, add_flags=_all_flags)
        )
    return run_job_operator(
        name=NAME,
        controller=lambda config, settings: TrainJobController(
            config=config, pod_groups=pod_groups, progress=progress_settings(settings)
        ),
        argv=args,
        add_flags=_progress_flags,
    )


if __name__ == "__main__":
    sys.exit(main())
