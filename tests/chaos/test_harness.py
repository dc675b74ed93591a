"""The chaos suite's own judges, on made-up data: they must see what they are there to see."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import PodHistory, PodLife, lives_ended_by_others, non_leader_writes


def _entry(user: str, at: str, resource: str, *, holder: str | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "stage": "ResponseComplete",
        "user": {"username": user},
        "verb": "update" if resource == "leases" else "create",
        "objectRef": {"resource": resource, "name": "tf-operator" if resource == "leases" else "p"},
        "responseStatus": {"code": 200},
        "requestReceivedTimestamp": f"2026-01-01T00:00:{at}Z",
    }
    if holder is not None:
        entry["requestObject"] = {"spec": {"holderIdentity": holder}}
    return entry


def test_writes_are_attributed_to_the_lease_holder_of_the_moment(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    entries = [
        _entry("chaos:a", "01.000000", "leases", holder="a_1"),
        _entry("chaos:a", "02.000000", "pods"),  # a leads: fine
        _entry("chaos:b", "03.000000", "leases", holder="b_1"),  # b takes over
        _entry("chaos:b", "04.000000", "pods"),  # fine
        _entry("chaos:a", "05.000000", "pods"),  # a writes after losing it
        _entry("chaos:b", "06.000000", "leases", holder=""),  # b releases
        _entry("chaos:b", "07.000000", "events"),  # b writes after releasing
    ]
    log.write_text("\n".join(json.dumps(e) for e in entries))
    found = non_leader_writes(log)
    assert len(found) == 2
    assert found[0].startswith("chaos:a create pods/") and "held by chaos:b" in found[0]
    assert found[1].startswith("chaos:b create events/") and "held by nobody" in found[1]


def test_a_slot_reused_after_a_pod_that_had_not_failed_is_flagged() -> None:
    history = PodHistory.__new__(PodHistory)
    history.lives = {
        "u1": PodLife("u1", "j-worker-0", ("j", "worker", "0"), ["Pending", "Running"], gone=True),
        "u2": PodLife("u2", "j-worker-0", ("j", "worker", "0"), ["Pending", "Failed"], gone=True),
        "u3": PodLife("u3", "j-worker-0", ("j", "worker", "0"), ["Pending"]),
    }
    history.by_slot = {("j", "worker", "0"): ["u1", "u2", "u3"]}
    [flagged] = history.recreated_without_failure()
    assert "last seen Running" in flagged


def _pod_call(user: str, verb: str, at: str, code: int = 200) -> dict[str, Any]:
    return {
        "stage": "ResponseComplete",
        "user": {"username": user},
        "verb": verb,
        "objectRef": {"resource": "pods", "name": "j-worker-0"},
        "responseStatus": {"code": code},
        "stageTimestamp": f"2026-01-01T00:00:{at}Z",
    }


def test_a_pod_only_kwok_deleted_is_not_the_operators_doing(tmp_path: Path) -> None:
    """kwok finishing an old pod's deletion by name after the operator made its replacement
    deletes the replacement (seen in a loaded run): replacing that one is right."""
    log = tmp_path / "audit.log"
    calls = [
        _pod_call("chaos:tf", "create", "01"),  # life 0: failed, the operator deletes it
        _pod_call("chaos:tf", "delete", "02"),
        _pod_call("chaos:tf", "create", "03"),  # life 1: kwok deletes it by name
        _pod_call("admin", "delete", "04"),
        _pod_call("admin", "delete", "05", code=404),
        _pod_call("chaos:tf", "create", "06"),  # life 2: both delete it
        _pod_call("admin", "delete", "07"),
        _pod_call("chaos:tf", "delete", "08"),
        _pod_call("chaos:tf", "create", "09"),
    ]
    log.write_text("\n".join(json.dumps(c) for c in calls))
    ended = lives_ended_by_others(log)
    assert ended == frozenset({("j-worker-0", 1)})

    history = PodHistory.__new__(PodHistory)
    history.lives = {
        "u0": PodLife("u0", "j-worker-0", ("j", "worker", "0"), ["Failed"], gone=True),
        "u1": PodLife("u1", "j-worker-0", ("j", "worker", "0"), ["Pending"], gone=True),
        "u2": PodLife("u2", "j-worker-0", ("j", "worker", "0"), ["Running"], gone=True),
        "u3": PodLife("u3", "j-worker-0", ("j", "worker", "0"), ["Pending"]),
    }
    history.by_slot = {("j", "worker", "0"): ["u0", "u1", "u2", "u3"]}
    # u1 (only kwok deleted it) is excused; u2 (the operator deleted it too) is not.
    [flagged] = history.recreated_without_failure(ended)
    assert "last seen Running" in flagged
