"""``trainer-operator run [flags]`` and ``python -m trainer_operator``: the TrainJob controller
alone (``training-operator`` serves it beside the v1 kinds). The progress endpoint's flags
(``--trainjob-status-*``) are every job operator's."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from jobcontroller import add_job_flags, parse_settings, run_job_operator
from trainer_operator.controller import TrainJobController, installed_pod_groups

NAME = "trainer-operator"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    pod_groups: frozenset[str] = frozenset()
    if not args or args[0] not in ("crd", "manifests"):
        pod_groups = installed_pod_groups(
            parse_settings(name=NAME, argv=args, add_flags=add_job_flags)
        )
    return run_job_operator(
        name=NAME,
        controller=lambda config, settings: TrainJobController(
            config=config, pod_groups=pod_groups
        ),
        argv=args,
    )


if __name__ == "__main__":
    sys.exit(main())
