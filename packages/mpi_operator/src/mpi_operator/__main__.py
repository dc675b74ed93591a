"""``mpi-operator run [flags]`` and ``python -m mpi_operator``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobcontroller import run_job_operator
from mpi_operator.controller import MPIJobController


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="mpi-operator",
        controller=lambda config, settings: MPIJobController(config=config),
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
