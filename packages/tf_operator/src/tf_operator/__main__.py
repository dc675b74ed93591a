"""``tf-operator run [flags]`` and ``python -m tf_operator``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobcontroller import run_job_operator
from tf_operator.controller import TFJobController


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="tf-operator",
        controller=lambda config, settings: TFJobController(config=config),
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
