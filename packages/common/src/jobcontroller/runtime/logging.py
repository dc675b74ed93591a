"""Process-wide log configuration: one renderer for structlog and for stdlib loggers.

Everything goes through stdlib ``logging`` so the libraries we depend on (aiohttp,
kubernetes_asyncio) and our own structlog loggers come out in one format on one stream.
structlog events are pre-processed by the shared chain and handed to
:class:`structlog.stdlib.ProcessorFormatter`; foreign stdlib records get the same chain as
``foreign_pre_chain`` so they carry the same keys (timestamp, level, logger and any
contextvars bound by the reconcile worker).
"""

from __future__ import annotations

import logging
import sys
from typing import Literal, TextIO

import structlog
from structlog.typing import Processor

LogFormat = Literal["json", "console"]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

#: Libraries that log very chattily at DEBUG; they stay at INFO or above unless asked for.
_NOISY_LIBRARIES = ("aiohttp.access", "asyncio")

#: Marks the handler this module installed, so reconfiguring replaces it instead of stacking.
_HANDLER_NAME = "jobcontroller"


def configure_logging(*, fmt: LogFormat, level: str, stream: TextIO | None = None) -> None:
    """Configure structlog and stdlib logging for the whole process.

    ``fmt="json"`` writes one JSON object per line (what log collectors want), with the keys
    ``msg``, ``level``, ``ts`` (RFC 3339, UTC) and ``logger`` plus the bound context; ``"console"``
    writes aligned, coloured-if-a-tty lines for people. ``level`` is one of
    :data:`LOG_LEVELS`. ``stream`` defaults to stderr, where Kubernetes collects it.
    Safe to call again: the previous handler is replaced.
    """
    level_name = level.lower()
    if level_name not in LOG_LEVELS:
        raise ValueError(f"unknown log level {level!r}; expected one of {', '.join(LOG_LEVELS)}")
    numeric_level = logging.getLevelName(level_name.upper())

    shared: list[Processor] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.PositionalArgumentsFormatter(),
        # RFC 3339 in UTC; `ts` in JSON, as zap (the Go operators' logger) and most log
        # stacks' defaults name it; the console renderer looks for `timestamp`.
        structlog.processors.TimeStamper(
            fmt="iso", utc=True, key="ts" if fmt == "json" else "timestamp"
        ),
        structlog.processors.StackInfoRenderer(),
    ]
    rendering: list[Processor]
    if fmt == "json":
        # The console renderer formats exc_info itself (and warns if it was done before).
        shared.append(structlog.processors.format_exc_info)
        # structlog calls the message `event`; log stacks (and zap's JSON) call it `msg`.
        rendering = [structlog.processors.EventRenamer("msg"), structlog.processors.JSONRenderer()]
    elif fmt == "console":
        is_tty = (stream or sys.stderr).isatty()
        rendering = [structlog.dev.ConsoleRenderer(colors=is_tty)]
    else:
        raise ValueError(f"unknown log format {fmt!r}; expected 'json' or 'console'")

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)

    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric_level)
    for name in _NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(max(numeric_level, logging.INFO))

    structlog.configure(
        processors=[
            structlog.stdlib.filter_by_level,
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        # Not cached: loggers are module-level proxies, and tests reconfigure.
        cache_logger_on_first_use=False,
    )
