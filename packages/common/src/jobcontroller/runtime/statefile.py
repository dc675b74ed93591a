"""A tiny file that outlives the process: what the operator must remember across a crash.

Written whole on every change (a temporary file renamed over the old one, so a reader sees
the old content or the new, never half of either) and never fsynced: the page cache survives
a process that is killed, which is all this is for (a node that loses power loses the pod's
emptyDir too). Writing costs a few system calls and no API request, so it can be done around
every reconcile.

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
    """One small text file, read once and rewritten atomically."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp = path.with_name(f".{path.name}.tmp")
        self.writable = True
        """False after a failed write: later writes are skipped."""
        self.writes = 0

    def read(self) -> str:
        """The content; empty when there is no file (a first start) or it cannot be read."""
        try:
            return self.path.read_text()
        except FileNotFoundError:
            return ""
        except OSError as exc:
            log.warning(
                "cannot read the state file; starting afresh", path=str(self.path), error=str(exc)
            )
            return ""

    def write(self, text: str) -> None:
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
            self.writes += 1
        except OSError as exc:
            self.writable = False
            with contextlib.suppress(OSError):
                self._tmp.unlink()
            log.error(
                "cannot write the state file; the crash-loop guard is off",
                path=str(self.path),
                error=str(exc),
            )
