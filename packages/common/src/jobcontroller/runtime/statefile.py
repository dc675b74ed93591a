"""A small file that outlives the process: what the operator must remember across a crash.

A log: :meth:`StateFile.rewrite` replaces the whole content (a temporary file renamed over the
old one, so a reader sees the old content or the new, never half of either) and
:meth:`StateFile.append` adds one line with a single ``write`` to a descriptor opened for
appending (a process killed around it leaves the line whole or absent). Nothing is fsynced: the
page cache survives a process that is killed, which is all this is for (a node that loses
power loses the pod's emptyDir too). An append costs one system call and no API request, so it
can be done around every reconcile; the caller rewrites a compact snapshot now and then.

A file that cannot be written (a read-only root, a full disk) does not stop the operator: the
first failure is logged and the file is left alone from then on.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import structlog

__all__ = ["StateFile"]

log = structlog.get_logger(__name__)


class StateFile:
    """One small text file: read once, then rewritten and appended to."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp = path.with_name(f".{path.name}.tmp")
        self._fd: int | None = None
        self.writable = True
        """False after a failed write: later writes are skipped."""
        self.appends = 0
        """Lines appended since the last rewrite."""
        self.writes = 0
        """Rewrites and appends so far."""

    def read(self) -> str:
        """The content; empty when there is no file (a first start) or it cannot be read."""
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            log.warning(
                "cannot read the state file; starting afresh", path=str(self.path), error=str(exc)
            )
            return ""

    def rewrite(self, text: str) -> None:
        """Replace the content with ``text``, atomically."""
        if not self.writable:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            try:
                os.write(fd, text.encode())
            finally:
                os.close(fd)
            os.replace(self._tmp, self.path)
            self._close()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            self.appends = 0
            self.writes += 1
        except OSError as exc:
            self._fail(exc)

    def append(self, line: str) -> None:
        """Add one line (``line`` ends with a newline) in one write."""
        if not self.writable:
            return
        if self._fd is None:
            self.rewrite(self.read())
            if self._fd is None:
                return
        try:
            os.write(self._fd, line.encode())
            self.appends += 1
            self.writes += 1
        except OSError as exc:
            self._fail(exc)

    def close(self) -> None:
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _fail(self, exc: OSError) -> None:
        self.writable = False
        self._close()
        with contextlib.suppress(OSError):
            self._tmp.unlink()
        log.error(
            "cannot write the state file; the crash-loop guard is off",
            path=str(self.path),
            error=str(exc),
        )
