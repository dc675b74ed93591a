"""``CrashGuard``: the crash-loop guard of one operator process (core/crashes.py decides).

Before a controller plans a job it notes the job as in flight in a state file
(runtime/statefile.py: one appended line, a compact rewrite every :data:`COMPACT_EVERY` lines)
and takes the note off when the plan is made; no API write is involved. A process that starts
and finds notes left there died working on those jobs: each gets a crash counted. A job counted
once is a suspect; twice, it is failed with reason OperatorCrashed instead of
being planned (``Observed.crashes`` tells the planner); three times, it is left alone. Every
other job is served as usual throughout.

One guard serves every controller of the process (the training-operator runs six), so keys
carry the job's kind. ``--state-dir`` says where the file lives; the Deployment mounts an
emptyDir at the default (under /tmp), which survives the container's restarts.

For tests that must see a crash, ``JOBCONTROLLER_CRASH_ON_JOB=<namespace>/<name>`` makes the
process SIGKILL itself when it starts planning that job (unfinished, not quarantined), as an
OOM kill would.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import structlog

from jobcontroller.core.crashes import ABANDON_CRASHES, CrashRecord, Standing, crash_key
from jobcontroller.runtime.statefile import StateFile

__all__ = ["COMPACT_EVERY", "CRASH_ON_JOB_ENV", "STATE_FILE_NAME", "CrashGuard"]

log = structlog.get_logger(__name__)

#: Test hook (see the module docstring).
CRASH_ON_JOB_ENV = "JOBCONTROLLER_CRASH_ON_JOB"
STATE_FILE_NAME = "in-flight.jsonl"
#: Appended lines after which the file is rewritten as a snapshot (a few hundred KB at most).
COMPACT_EVERY = 2000


def _finished(job: dict[str, Any]) -> bool:
    return any(
        c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True"
        for c in (job.get("status") or {}).get("conditions") or ()
    )


class CrashGuard:
    """See the module docstring. Create with :meth:`open`, once per process."""

    def __init__(self, state: StateFile, record: CrashRecord, *, crash_on: str = "") -> None:
        self._state = state
        self._record = record
        self._crash_on = crash_on
        self._abandoned_logged: set[str] = set()

    @classmethod
    def open(cls, state_dir: str | Path) -> CrashGuard:
        """Read the record left by the previous process, count its crashes, and save."""
        state = StateFile(Path(state_dir) / STATE_FILE_NAME)
        record = CrashRecord.from_text(state.read())
        died = record.restarted()
        state.rewrite(record.to_text())
        for key in died:
            _, count = record.crashes[key]
            log.warning(
                "the previous operator process died while working on this job",
                job=key,
                crashes=count,
                next=Standing.of(count).name.lower(),
            )
        return cls(state, record, crash_on=os.environ.get(CRASH_ON_JOB_ENV, ""))

    def crashes(self, kind: str, key: str, uid: str) -> int:
        """Times in a row the operator died working on this job."""
        return self._record.count(crash_key(kind, key), uid)

    def forget(self, kind: str, key: str) -> None:
        """The job is gone: drop what is known of it."""
        entry = crash_key(kind, key)
        self._abandoned_logged.discard(entry)
        if entry in self._record.crashes or entry in self._record.in_flight:
            self._save(self._record.forget(entry))

    @contextlib.contextmanager
    def planning(self, kind: str, job: dict[str, Any]) -> Iterator[Standing]:
        """Around the planning of ``job`` (synchronous: no other job is planned meanwhile, so
        a death here points at this job alone): yields its standing. ABANDONED means: do not
        touch it (nothing is noted then).

        Only planning is guarded, not the API calls after it: that is where a job's size turns
        into memory (bodies, env), it takes milliseconds for a sane job, and so a SIGKILL from
        outside (a node drain, a chaos test) rarely lands in it, let alone twice in a row on
        the same job's first plan after a restart."""
        meta = job.get("metadata") or {}
        key = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        entry, uid = crash_key(kind, key), str(meta.get("uid") or "")
        standing = Standing.of(self._record.count(entry, uid))
        if standing == Standing.ABANDONED:
            if entry not in self._abandoned_logged:
                self._abandoned_logged.add(entry)
                log.error(
                    f"left alone: the operator died {ABANDON_CRASHES} or more times in a row "
                    "working on this job; delete it to clear",
                    job=entry,
                )
            yield standing
            return
        self._save(self._record.begin(entry, uid))
        if self._crash_on == key and standing < Standing.QUARANTINED and not _finished(job):
            # The test hook: dying as planning this job would (a quarantined job is not
            # planned, a finished one only cleaned up).
            os.kill(os.getpid(), signal.SIGKILL)
        completed = False
        try:
            yield standing
            completed = True
        finally:
            self._save(self._record.end(entry, completed=completed))

    def statistics(self) -> dict[str, int]:
        """Entries in the record and file writes so far."""
        return {
            "in_flight": len(self._record.in_flight),
            "crashed": len(self._record.crashes),
            "writes": self._state.writes,
        }

    def _save(self, line: str) -> None:
        if self._state.appends >= COMPACT_EVERY:
            self._state.rewrite(self._record.to_text())
        else:
            self._state.append(line)
