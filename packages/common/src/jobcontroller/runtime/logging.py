"""Process-wide log configuration: one renderer for structlog and for stdlib loggers.

Our own structlog loggers render straight onto the stream (structlog's own bound logger, no
stdlib ``LogRecord``, handler or formatter on the way, orjson for the JSON: a line costs 0.39 of
what the stdlib route cost, ``bench/bench_logging.py``). The libraries we depend on (asyncio
among them) log through stdlib ``logging``: their records get the same chain as
``foreign_pre_chain`` of a :class:`structlog.stdlib.ProcessorFormatter` on the same stream,
so every line carries the same keys (timestamp, level, logger and any contextvars bound by
the reconcile worker). Both write under the handler's lock, a line at a time.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, Literal, TextIO

import orjson
import structlog
from structlog.typing import EventDict, Processor, WrappedLogger

LogFormat = Literal["json", "console"]

LOG_LEVELS = ("debug", "info", "warning", "error", "critical")

#: Libraries that log very chattily at DEBUG; they stay at INFO or above unless asked for.
_NOISY_LIBRARIES = ("asyncio",)

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
        rendering = [
            structlog.processors.EventRenamer("msg"),
            structlog.processors.JSONRenderer(serializer=_json),
        ]
    elif fmt == "console":
        is_tty = (stream or sys.stderr).isatty()
        rendering = [structlog.dev.ConsoleRenderer(colors=is_tty)]
    else:
        raise ValueError(f"unknown log format {fmt!r}; expected 'json' or 'console'")

    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *rendering],
    )
    out = stream if stream is not None else sys.stderr
    handler = logging.StreamHandler(out)
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(formatter)

    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == _HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric_level)
    for name in _NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(max(numeric_level, logging.INFO))

    assert handler.lock is not None  # made by Handler.__init__
    structlog.configure(
        processors=[
            # The stdlib chain's names for the same keys: add_log_level and add_logger_name
            # read the method name and the writer's ``name``, as they do a stdlib logger's.
            *shared,
            *rendering,
        ],
        logger_factory=_LineWriterFactory(out, handler.lock),
        wrapper_class=structlog.make_filtering_bound_logger(numeric_level),
        # Not cached: loggers are module-level proxies, and tests reconfigure.
        cache_logger_on_first_use=False,
    )


def _json_default(value: Any) -> Any:
    """What orjson cannot encode itself: as structlog's stdlib-json fallback, its repr."""
    structlog_repr = getattr(value, "__structlog__", None)
    return structlog_repr() if structlog_repr is not None else repr(value)


def _json(event: EventDict, **_: Any) -> str:
    try:
        return orjson.dumps(event, default=_json_default, option=orjson.OPT_NON_STR_KEYS).decode()
    except TypeError:  # what orjson refuses (an integer past 64 bits): the stdlib's encoder
        return json.dumps(event, default=_json_default)


class _LineWriter:
    """The end of structlog's chain: the rendered line onto the stream, under the stdlib
    handler's lock (library records share the stream), flushed as the handler flushes."""

    __slots__ = ("_lock", "_stream", "name")

    def __init__(self, stream: TextIO, lock: Any, name: str) -> None:
        self._stream, self._lock, self.name = stream, lock, name

    def msg(self, message: str) -> None:
        with self._lock:
            try:
                self._stream.write(message + "\n")
                self._stream.flush()
            except (OSError, ValueError):  # closed or broken: as StreamHandler, never raise
                pass

    debug = info = warning = warn = error = critical = exception = fatal = log = msg


class _LineWriterFactory:
    """``structlog.get_logger(name)`` → a :class:`_LineWriter` named ``name`` (``add_logger_name``
    reads it)."""

    def __init__(self, stream: TextIO, lock: Any) -> None:
        self._stream, self._lock = stream, lock

    def __call__(self, *args: Any) -> WrappedLogger:
        name = str(args[0]) if args and args[0] is not None else "root"
        return _LineWriter(self._stream, self._lock, name)
