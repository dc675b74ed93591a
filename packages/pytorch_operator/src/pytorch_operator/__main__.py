"""``pytorch-operator run [flags]`` and ``python -m pytorch_operator``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from jobcontroller import PlanConfig, Settings, run_job_operator
from pytorch_operator.controller import PyTorchJobController
from pytorch_operator.initcontainer import (
    CHECK_DNS,
    CHECK_TCP,
    DEFAULT_INIT_CONTAINER_IMAGE,
    DEFAULT_INIT_CONTAINER_MAX_TRIES,
    DEFAULT_INIT_CONTAINER_TEMPLATE_FILE,
    InitContainerTemplate,
)


def _not_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (no limit) or more, got {value}")
    return value


def _template(path: str) -> InitContainerTemplate | None:
    # argparse converts the default path too: with no file there (the usual case) PyYAML,
    # about 1.5 MB of RSS, is never imported.
    try:
        return InitContainerTemplate.load(path)
    except (OSError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc


def add_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("pytorch")
    group.add_argument(
        "--pytorch-init-container-image",
        default=DEFAULT_INIT_CONTAINER_IMAGE,
        help="image of the init container that makes workers wait for the master; it needs "
        "sh, grep and an nc with -z (busybox, alpine), or nslookup under --pytorch-init-"
        "container-check dns",
    )
    group.add_argument(
        "--pytorch-init-container-max-tries",
        type=_not_negative,
        default=DEFAULT_INIT_CONTAINER_MAX_TRIES,
        help="attempts, 2 s apart, before a worker's init container gives up; 0 (the default) "
        "waits as long as the job may (its activeDeadlineSeconds, or until it fails)",
    )
    group.add_argument(
        "--pytorch-init-container-check",
        choices=(CHECK_TCP, CHECK_DNS),
        default=CHECK_TCP,
        help="tcp: wait until the master's port accepts connections; dns: until its name "
        "resolves (v1.9's check, for meshes where init containers cannot open connections)",
    )
    group.add_argument(
        "--pytorch-init-container-template-file",
        type=_template,
        default=DEFAULT_INIT_CONTAINER_TEMPLATE_FILE,
        help="a YAML list of init containers with {{.MasterAddr}}, {{.MasterPort}}, "
        "{{.InitContainerImage}} and {{.MaxTries}}, used instead of the built-in one when the "
        "file exists (as in v1.9)",
    )


def build_controller(config: PlanConfig, settings: Settings) -> PyTorchJobController:
    """The controller, from the flags :func:`add_flags` added."""
    return PyTorchJobController(
        config=config,
        init_container_image=settings.flag("pytorch_init_container_image", str),
        init_container_max_tries=settings.flag("pytorch_init_container_max_tries", int),
        init_container_check=settings.flag("pytorch_init_container_check", str),
        init_container_template=settings.optional_flag(
            "pytorch_init_container_template_file", InitContainerTemplate
        ),
    )


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="pytorch-operator", controller=build_controller, argv=argv, add_flags=add_flags
    )


if __name__ == "__main__":
    sys.exit(main())
