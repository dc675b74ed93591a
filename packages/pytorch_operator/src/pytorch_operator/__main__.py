"""``pytorch-operator run [flags]`` and ``python -m pytorch_operator``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobcontroller import run_job_operator
from pytorch_operator.controller import PyTorchJobController
from pytorch_operator.initcontainer import (
    DEFAULT_INIT_CONTAINER_IMAGE,
    DEFAULT_INIT_CONTAINER_MAX_TRIES,
)


def _at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("pytorch")
    group.add_argument(
        "--pytorch-init-container-image",
        default=DEFAULT_INIT_CONTAINER_IMAGE,
        help="image of the init container that makes workers wait for the master; it needs "
        "sh, seq, grep and an nc with -z (busybox, alpine)",
    )
    group.add_argument(
        "--pytorch-init-container-max-tries",
        type=_at_least_one,
        default=DEFAULT_INIT_CONTAINER_MAX_TRIES,
        help="connection attempts, 2 s apart, before a worker's init container gives up",
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="pytorch-operator",
        controller=lambda config, settings: PyTorchJobController(
            config=config,
            init_container_image=str(settings.extras["pytorch_init_container_image"]),
            init_container_max_tries=int(settings.extras["pytorch_init_container_max_tries"]),
        ),
        argv=argv,
        add_flags=add_flags,
    )


if __name__ == "__main__":
    sys.exit(main())
