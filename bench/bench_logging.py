"""CPU of one JSON log line, as the operator writes them (``--log-format=json``) to a file.

An MPIJob's life logs about 9 lines (its objects created, each condition change, each Event).
Measured: µs per line of

- ``ours``: a structlog logger configured by ``configure_logging`` (structlog's own bound
  logger, rendered with orjson, written by :class:`_LineWriter`);
- ``stdlib-route``: the route every line took before (structlog handing the event to stdlib
  ``logging`` and its ``ProcessorFormatter``), rebuilt here for the comparison;
- ``library``: a stdlib record (what aiohttp or asyncio log) through our handler.

Each is the best of 3 runs of ``--number`` lines with the reconcile worker's context bound,
written to a file.

Usage: ``uv run python bench/bench_logging.py [--json bench/results/logging.json]``
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

import structlog

from jobcontroller.runtime.logging import configure_logging


def _stdlib_route(stream: TextIO) -> None:
    """The configuration ``configure_logging`` made before: every line through stdlib."""
    configure_logging(fmt="json", level="info", stream=stream)
    shared = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.PositionalArgumentsFormatter(),
        structlog.processors.TimeStamper(fmt="iso", utc=True, key="ts"),
        structlog.processors.StackInfoRenderer(),
        structlog.processors.format_exc_info,
    ]
    handler = logging.getLogger().handlers[-1]
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.EventRenamer("msg"),
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )


def _line(name: str) -> Callable[[], None]:
    log = structlog.get_logger(name)

    def one() -> None:
        log.info(
            "condition Running: absent -> True",
            condition="Running",
            reason="MPIJobRunning",
            message="MPIJob bench/mpi-01 is running.",
        )

    return one


def _library_line() -> Callable[[], None]:
    log = logging.getLogger("aiohttp.client")

    def one() -> None:
        log.warning("Unclosed connection %s", "conn-1")

    return one


def measure(number: int) -> dict[str, float]:
    structlog.contextvars.bind_contextvars(job="bench/mpi-01", kind="MPIJob", reconcile_id="7f3a")
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, setup, line in (
            ("ours", lambda s: configure_logging(fmt="json", level="info", stream=s), _line),
            ("stdlib-route", _stdlib_route, _line),
            ("library", lambda s: configure_logging(fmt="json", level="info", stream=s), None),
        ):
            with (Path(tmp) / f"{label}.log").open("w") as stream:
                setup(stream)
                call = _library_line() if line is None else line("jobcontroller.controller")
                best = min(timeit.repeat(call, number=number, repeat=3))
                out[label] = round(best / number * 1e6, 2)
            written = (Path(tmp) / f"{label}.log").read_text().splitlines()
            assert len(written) == 3 * number and json.loads(written[-1])["level"], label
    structlog.contextvars.clear_contextvars()
    configure_logging(fmt="json", level="info")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=5000)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    figures = measure(args.number)
    for label, us in figures.items():
        print(f"{label:14s} {us:7.2f} µs per line")
    print(f"ours / stdlib-route: {figures['ours'] / figures['stdlib-route']:.2f}")
    if args.json:
        args.json.write_text(
            json.dumps({"us_per_line": figures, "number": args.number}, indent=2) + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
