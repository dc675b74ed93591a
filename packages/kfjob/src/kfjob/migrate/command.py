"""``kfjob migrate``'s place in the ``kfjob`` command: its flags and output.

Without ``--check`` it prints the objects to apply (YAML, the TrainingRuntime first) and the
warnings on stderr; with ``--check`` a report of what differs in the pods instead. Exit status
0 whatever the warnings (they are the report), 1 when a document cannot be migrated.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

__all__ = ["add_migrate_command"]


def add_migrate_command(add: Callable[[str, str, str], argparse.ArgumentParser]) -> None:
    """Add ``migrate`` with ``add(name, help, description)``, the CLI's subcommand maker."""
    p = add(
        "migrate",
        "convert v1 jobs to Kubeflow Trainer v2 TrainJobs (offline)",
        "Print the Kubeflow Trainer v2.3.0 TrainJob (and, where no shipped runtime fits, the "
        "TrainingRuntime) doing what each PyTorchJob, JAXJob, XGBoostJob or MPIJob in FILE "
        "does (- for stdin). What a TrainJob cannot carry is a warning on stderr. With "
        "--check, render both offline with the operators' own planners and report what "
        "differs in the pods instead.",
    )
    p.add_argument("file", metavar="FILE")
    p.add_argument("--check", action="store_true", help="report what differs in the pods (no YAML)")
    p.add_argument(
        "--no-v1-env",
        dest="v1_env",
        action="store_false",
        help="leave out the v1 operator's variables (MASTER_ADDR, RANK...) from trainer.env",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Imported here: the other commands need not load the TrainJob planner.
    from kfjob.migrate import MigrateError, migrate
    from kfjob.migrate.check import check, report_lines
    from kfjob.render import load_documents, to_yaml
    from kfjob.tables import err_console, out_console

    source = "<stdin>" if args.file == "-" else args.file
    text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text()
    err, out = err_console(), out_console()
    try:
        migrations = [
            migrate(doc, v1_env=args.v1_env) for doc in load_documents(text, source=source)
        ]
        if args.check:
            for i, m in enumerate(migrations):
                if i:
                    out.print("")
                for line in report_lines(check(m, namespace=args.namespace or "default")):
                    out.print(line, markup=False, highlight=False)
            return 0
    except MigrateError as exc:
        err.print(f"error: {exc}", markup=False)
        return 1
    for m in migrations:
        for w in m.warnings:
            err.print(f"warning: {m.kind} {m.name}: {w}", markup=False)
    sys.stdout.write(to_yaml(d for m in migrations for d in m.documents()))
    return 0
