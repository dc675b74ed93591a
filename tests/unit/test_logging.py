"""configure_logging: one renderer for structlog and stdlib loggers, contextvars, exceptions."""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import structlog

from jobcontroller.runtime.logging import configure_logging


@pytest.fixture(autouse=True)
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


def test_json_lines_carry_level_logger_utc_timestamp_and_bound_context() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", level="info", stream=out)
    with structlog.contextvars.bound_contextvars(controller="tfjob-controller", key="ns/a"):
        structlog.get_logger("jobcontroller.test").info("reconciled", pods=3)
    [entry] = lines(out)
    assert entry["msg"] == "reconciled"
    assert entry["pods"] == 3
    assert entry["level"] == "info"
    assert entry["logger"] == "jobcontroller.test"
    assert entry["controller"] == "tfjob-controller" and entry["key"] == "ns/a"
    assert entry["ts"].endswith("Z") and "T" in entry["ts"]


def test_stdlib_library_logs_use_the_same_renderer() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", level="info", stream=out)
    with structlog.contextvars.bound_contextvars(reconcile_id="r1"):
        logging.getLogger("kubernetes_asyncio.config").warning("token %s expired", "abc")
    [entry] = lines(out)
    assert entry["msg"] == "token abc expired"
    assert entry["level"] == "warning"
    assert entry["logger"] == "kubernetes_asyncio.config"
    assert entry["reconcile_id"] == "r1"


def test_any_value_is_written_and_lines_of_both_kinds_stay_whole_and_in_order() -> None:
    # Our lines are rendered by structlog itself (not through stdlib logging): values JSON
    # has no form for are written as their repr, positional arguments are formatted, and
    # each line is flushed whole onto the stream the library records share.
    class Opaque:
        def __repr__(self) -> str:
            return "<opaque>"

    out = io.StringIO()
    configure_logging(fmt="json", level="info", stream=out)
    log = structlog.get_logger("jobcontroller.test")
    log.info("pods of %s", "ns/a", counts={1: 2}, value=Opaque(), big=2**70)
    logging.getLogger("aiohttp.client").warning("between")
    log.warning("last")
    first, between, last = lines(out)
    assert first["msg"] == "pods of ns/a"
    assert first["counts"] == {"1": 2} and first["value"] == "<opaque>"
    assert first["big"] == 2**70
    assert (between["msg"], between["logger"]) == ("between", "aiohttp.client")
    assert (last["msg"], last["level"]) == ("last", "warning")


def test_a_closed_stream_loses_the_line_but_never_raises_into_the_caller() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", level="info", stream=out)
    out.close()
    structlog.get_logger("jobcontroller.test").info("after the stream closed")


def test_level_filters_both_kinds_of_logger() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", level="warning", stream=out)
    structlog.get_logger("a").info("hidden")
    logging.getLogger("b").info("hidden too")
    structlog.get_logger("a").error("shown")
    assert [e["msg"] for e in lines(out)] == ["shown"]


def test_exceptions_are_rendered_into_the_json_line() -> None:
    out = io.StringIO()
    configure_logging(fmt="json", level="info", stream=out)
    try:
        raise ValueError("boom")
    except ValueError:
        structlog.get_logger("x").exception("failed")
    [entry] = lines(out)
    assert "Traceback" in entry["exception"] and "ValueError: boom" in entry["exception"]


def test_console_format_is_human_readable_and_reconfigurable() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(fmt="json", level="info", stream=first)
    configure_logging(fmt="console", level="debug", stream=second)
    structlog.get_logger("x").debug("hello", job="ns/a")
    assert first.getvalue() == ""  # the earlier handler was replaced, not stacked
    text = second.getvalue()
    assert "hello" in text and "job=ns/a" in text and "debug" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


def test_unknown_level_or_format_is_rejected() -> None:
    with pytest.raises(ValueError):
        configure_logging(fmt="json", level="loud")
    with pytest.raises(ValueError):
        configure_logging(fmt="xml", level="info")  # type: ignore[arg-type]


OPERATOR_ENTRY_MODULES = [
    f"{kind}_operator.__main__"
    for kind in ("training", "tf", "pytorch", "mpi", "xgboost", "paddle", "jax", "trainer")
]


@pytest.mark.parametrize("module", OPERATOR_ENTRY_MODULES)
def test_an_operator_never_imports_rich_though_it_is_installed(module: str) -> None:
    """The development environment has rich (kfjob's); an operator's process imports structlog
    without it, so its logs and its start are those of the image, which has no rich. rich is
    still importable afterwards, for whoever wants it."""
    assert importlib.util.find_spec("rich") is not None, "this environment should have rich"
    code = (
        "import sys\n"
        f"import {module}\n"
        "import structlog.dev\n"
        "assert 'rich' not in sys.modules, sorted(m for m in sys.modules if 'rich' in m)\n"
        "assert structlog.dev.rich is None\n"
        "import rich.console\n"
        "print('ok')\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout) == (0, "ok\n"), done.stderr
