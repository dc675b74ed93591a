"""``xgboost-operator run [flags]`` and ``python -m xgboost_operator``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobcontroller import run_job_operator
from xgboost_operator.controller import XGBoostJobController


def main(argv: Sequence[str] | None = None) -> int:
    return run_job_operator(
        name="xgboost-operator",
        controller=lambda config, settings: XGBoostJobController(config=config),
        argv=argv,
    )


if __name__ == "__main__":
    sys.exit(main())
