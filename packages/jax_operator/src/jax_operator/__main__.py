"""``jax-operator run [flags]`` and ``python -m jax_operator``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jax_operator.controller import JAXJobController
from jobcontroller import run_job_operator


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="jax-operator",
        controller=lambda config, settings: JAXJobController(config=config),
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
