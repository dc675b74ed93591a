"""``trainer-operator run [flags]`` and ``python -m trainer_operator``: the TrainJob controller
alone (``training-operator`` serves it beside the v1 kinds)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobcontroller import run_job_operator
from trainer_operator.controller import TrainJobController


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="trainer-operator",
        controller=lambda config, settings: TrainJobController(config=config),
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
