"""Per-job state: the little a controller remembers about a job between its reconciles.

Reconciles are level-triggered: each one reads the job and what it owns from the caches again.
What the caches cannot show is kept here, one :class:`JobState` per job key: objects in the
job's way that lack the job-name label (no cache holds them), the run of identical creation
failures the planner acts on, when the job's status was last written (to coalesce
counter-only writes), and the generation whose spec was found valid.
:meth:`JobStates.forget` drops all of it, and the job's expectations, in one place: an
operator runs for months and sees millions of jobs come and go.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from msgspec import Struct, field

from jobcontroller.core.types import CreateFailure, Obj
from jobcontroller.runtime.expectations import Expectations

__all__ = ["InFlightStatus", "JobState", "JobStates"]


class JobState(Struct):
    """What is remembered about one job."""

    foreign: dict[tuple[str, str], Obj] = field(default_factory=dict)
    """Objects outside the caches that a creation ran into, by (kind, name): their metadata,
    for the planner to report the conflict (see controller/adoption.py)."""
    create_failure: CreateFailure | None = None
    """The latest run of identical creation failures, until a creation succeeds."""
    status_written: float | None = None
    """When this process last wrote the job's status (monotonic seconds)."""
    status_held: float | None = None
    """Since when a status change that touches only the replica counters has been held back
    while the job starts (monotonic seconds; None: nothing held)."""
    status_backlogged: float | None = None
    """Since when a change that may wait has been held back because the operator's client had
    no request to spare (monotonic seconds; None: it is not)."""
    running_backlogged: float | None = None
    """Since when, of those, one that brings the Running condition, or a new job's Created,
    has been (None: none)."""
    patches_backlogged: float | None = None
    """Since when patches that may wait (``PatchObject.can_wait``) have been held back
    because the client's rate limiter was saturated (monotonic seconds; None: they are not)."""
    valid_spec: tuple[str, int] | None = None
    """(uid, generation) at which a pass found the job valid (``Plan.valid_spec``): the
    planner does not check that spec again."""


class InFlightStatus(Struct):
    """A status PUT not yet answered (``JobStates.status_in_flight``)."""

    status: Obj
    """The status it writes."""
    echoed: bool = False
    """Whether the watch brought it back and the echo was not handed on: if the PUT then
    fails (a retry of a write whose first answer was lost meets its own change: 409), the
    job is queued as the echo would have queued it."""


class JobStates:
    """The :class:`JobState` of each job that has one, and the job's expectations, which are
    kept per job and kind (``<namespace>/<name>/<Kind>``)."""

    def __init__(self, *, expectations: Expectations, kinds: Iterable[str]) -> None:
        self.expectations = expectations
        self.kinds = tuple(kinds)
        """The kinds a job's expectations are kept for (what the controller creates)."""
        self._states: dict[str, JobState] = {}
        self.status_in_flight: dict[str, InFlightStatus] = {}
        """Job key -> the status PUT in flight for it: the watch may bring that write back
        before its answer does, and the echo need not plan the job again."""
        self.also_forget: list[Callable[[str], None]] = []
        """Called with the key of every job forgotten (the crash-loop guard's record)."""

    def get(self, key: str) -> JobState | None:
        return self._states.get(key)

    def of(self, key: str) -> JobState:
        """The job's state, created empty the first time something is remembered."""
        state = self._states.get(key)
        if state is None:
            state = self._states[key] = JobState()
        return state

    def satisfied(self, key: str) -> bool:
        """Whether every creation and deletion the job expected has been observed (or its
        record expired), so the caches show what the job's last pass did."""
        return all(self.expectations.satisfied(f"{key}/{kind}") for kind in self.kinds)

    def forget(self, key: str) -> None:
        """The job is gone: drop everything remembered about it."""
        for kind in self.kinds:
            self.expectations.delete(f"{key}/{kind}")
        self._states.pop(key, None)
        for forget in self.also_forget:
            forget(key)

    def __contains__(self, key: object) -> bool:
        return key in self._states

    def __len__(self) -> int:
        return len(self._states)
