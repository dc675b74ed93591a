"""``paddle-operator run [flags]`` and ``python -m paddle_operator``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobcontroller import run_job_operator
from paddle_operator.controller import PaddleJobController


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="paddle-operator",
        controller=lambda config, settings: PaddleJobController(config=config),
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
