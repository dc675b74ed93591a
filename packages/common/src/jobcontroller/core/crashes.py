"""The crash-loop guard's decisions: which jobs the operator died working on, and what follows.

An operator killed while planning a job (for memory, most likely: a bug, or a limit set too
low) would meet the same job first thing after its restart, and die again, for as long as the
job exists; every other job would wait. So the operator notes which jobs it is working on in a
small record that survives its restarts (runtime/statefile.py keeps it in a file; the
Deployment's emptyDir outlives the container), and on each start counts a crash against every
job still noted there:

- 0: planned as usual;
- 1, a *suspect*: planned as usual, and cleared once one of its plans completes (planning
  is synchronous, so the record names one job at the moment of a death in it);
- 2 (:data:`QUARANTINE_CRASHES`): failed with reason ``OperatorCrashed`` without being
  planned (:func:`quarantine_plan`); a job that had finished already is only cleaned up;
- 3 and more: the operator died even so (its clean-up, or the quarantine itself): left alone.

Keys are ``<Kind>:<namespace>/<name>`` and entries carry the job's UID, so a job deleted and
created again under the same name starts clean. Pure: the caller reads and writes the file.
"""

from __future__ import annotations

import json
from datetime import datetime
from enum import IntEnum
from typing import Any

from msgspec import Struct, field

from jobcontroller.core.lifecycle import fail_unplanned, stored_status
from jobcontroller.core.types import Plan

__all__ = [
    "ABANDON_CRASHES",
    "MAX_RECORDED",
    "QUARANTINE_CRASHES",
    "REASON_OPERATOR_CRASHED",
    "CrashRecord",
    "Standing",
    "crash_key",
    "quarantine_message",
    "quarantine_plan",
]

QUARANTINE_CRASHES = 2
ABANDON_CRASHES = 3
REASON_OPERATOR_CRASHED = "OperatorCrashed"

#: Entries kept at most (the oldest go first). In-flight entries are bounded by the workers;
#: crash counts by the jobs in flight at each crash, dropped when a reconcile completes or the
#: job goes. This only bounds a pathological history.
MAX_RECORDED = 4096

_VERSION = 2


class Standing(IntEnum):
    """What a job's crash count means for its next reconcile."""

    CLEAR = 0
    SUSPECT = 1
    QUARANTINED = QUARANTINE_CRASHES
    ABANDONED = ABANDON_CRASHES

    @classmethod
    def of(cls, crashes: int) -> Standing:
        return cls(min(max(crashes, 0), ABANDON_CRASHES))


def crash_key(kind: str, key: str) -> str:
    """The record's key of job ``key`` (``namespace/name``) of ``kind``."""
    return f"{kind}:{key}"


class CrashRecord(Struct):
    """Jobs in flight (key -> UID) and crash counts (key -> (UID, count)).

    Its text is a log of JSON lines, replayed in order: a snapshot (what :meth:`to_text`
    writes) followed by the lines the changing methods return, which the caller appends as
    they happen (one small write each; a torn last line is ignored).
    """

    in_flight: dict[str, str] = field(default_factory=dict)
    crashes: dict[str, tuple[str, int]] = field(default_factory=dict)

    def count(self, key: str, uid: str) -> int:
        uid_then, count = self.crashes.get(key, ("", 0))
        return count if uid_then == uid else 0

    def restarted(self) -> list[str]:
        """Count a crash against every job still in flight (the process died working on
        them); returns their keys. Call once, when a new process opens the record, and write
        the snapshot afterwards."""
        died = list(self.in_flight)
        for key, uid in self.in_flight.items():
            before = self.count(key, uid)
            self.crashes.pop(key, None)  # re-inserted last: the newest entry
            self.crashes[key] = (uid, before + 1)
        self.in_flight.clear()
        self._trim()
        return died

    def begin(self, key: str, uid: str) -> str:
        """The job is being worked on; returns the line to append."""
        self.in_flight[key] = uid
        self._trim()
        return _line(_BEGIN, key, uid)

    def end(self, key: str, *, completed: bool) -> str:
        """The reconcile ended: in flight no more; a completed one clears the count."""
        self.in_flight.pop(key, None)
        if completed:
            self.crashes.pop(key, None)
        return _line(_END, key, completed)

    def forget(self, key: str) -> str:
        """The job is gone."""
        self.in_flight.pop(key, None)
        self.crashes.pop(key, None)
        return _line(_FORGET, key)

    def __len__(self) -> int:
        return len(self.in_flight) + len(self.crashes)

    def _trim(self) -> None:
        for entries in (self.crashes, self.in_flight):
            while len(entries) > MAX_RECORDED:
                del entries[next(iter(entries))]

    def to_text(self) -> str:
        """A snapshot: the version, then every count and every job in flight."""
        lines = [_line(_VERSION_TAG, _VERSION)]
        lines += [_line(_CRASH, key, uid, n) for key, (uid, n) in self.crashes.items()]
        lines += [_line(_BEGIN, key, uid) for key, uid in self.in_flight.items()]
        return "".join(lines)

    @classmethod
    def from_text(cls, text: str) -> CrashRecord:
        """Replay a snapshot and the lines appended after it. Anything unreadable (a torn
        last line, an unknown version) is skipped or yields an empty record: the guard then
        starts afresh rather than failing the operator."""
        record = cls()
        lines = text.splitlines()
        if not lines or _parse(lines[0]) != [_VERSION_TAG, _VERSION]:
            return record
        for raw in lines[1:]:
            item = _parse(raw)
            match item:
                case [str(tag), str(key), str(uid)] if tag == _BEGIN:
                    record.in_flight[key] = uid
                case [str(tag), str(key), bool(completed)] if tag == _END:
                    record.end(key, completed=completed)
                case [str(tag), str(key)] if tag == _FORGET:
                    record.forget(key)
                case [str(tag), str(key), str(uid), int(n)] if tag == _CRASH:
                    record.crashes[key] = (uid, n)
                case _:
                    continue
        record._trim()
        return record


_VERSION_TAG, _BEGIN, _END, _FORGET, _CRASH = "v", "in", "out", "gone", "crash"


def _line(*items: object) -> str:
    return json.dumps(items, separators=(",", ":")) + "\n"


def _parse(raw: str) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return None


def quarantine_message(kind: str, name: str, crashes: int) -> str:
    return (
        f"{kind} {name} was failed by its operator: the operator crashed {crashes} times in a "
        f"row while working on it (most likely killed for memory). Check what it asks for "
        f"against the operator's limits (--max-pods-per-job, --max-object-bytes) and the "
        f"operator's memory limit; delete and create it again to retry"
    )


def quarantine_plan(
    *, kind: str, raw_job: dict[str, Any], crashes: int, now: datetime
) -> Plan | None:
    """Fail a job the operator keeps dying on, without planning it: the status is read from
    the stored object alone (the spec may be what kills the planner). None for a job that has
    finished already: its clean-up is planned as usual."""
    if stored_status(raw_job).is_finished():
        return None
    name = str((raw_job.get("metadata") or {}).get("name") or "")
    return fail_unplanned(
        kind=kind,
        raw_job=raw_job,
        reason=REASON_OPERATOR_CRASHED,
        message=quarantine_message(kind, name, crashes),
        now=now,
    )
