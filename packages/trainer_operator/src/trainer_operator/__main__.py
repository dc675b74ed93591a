"""``trainer-operator run [flags]`` and ``python -m trainer_operator``: the TrainJob controller
alone (``training-operator`` serves it beside the v1 kinds)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobcontroller import run_job_operator
from trainer_operator.controller import TrainJobController
from trainer_operator.progressflags import add_progress_flags, progress_settings


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="trainer-operator",
        controller=lambda config, settings: TrainJobController(
            config=config, progress=progress_settings(settings)
        ),
        argv=argv,
        add_flags=lambda parser: add_progress_flags(parser, service="trainer-operator"),
    )


if __name__ == "__main__":
    sys.exit(main())
