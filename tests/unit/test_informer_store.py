"""The informer's store: keys, indexes kept in step with writes, and relist diffing."""

from __future__ import annotations

from typing import Any

import pytest

from jobcontroller.runtime.store import OWNER_UID_INDEX, Store, object_key, older_than_stored

JOB_LABEL = "training.kubeflow.org/job-name"


def pod(
    name: str,
    *,
    ns: str = "ns",
    rv: str = "1",
    owner: str | None = None,
    job: str | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns, "resourceVersion": rv}
    if owner is not None:
        meta["ownerReferences"] = [
            {"uid": "not-the-controller", "controller": False},
            {"uid": owner, "controller": True},
        ]
    if job is not None:
        meta["labels"] = {JOB_LABEL: job}
    return {"metadata": meta}


def names(objs: list[dict[str, Any]]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in objs)


class TestKeys:
    def test_namespaced_and_cluster_scoped(self) -> None:
        assert object_key(pod("a", ns="x")) == "x/a"
        assert object_key({"metadata": {"name": "node-1"}}) == "node-1"

    def test_get_and_list(self) -> None:
        store = Store()
        store.upsert(pod("a", ns="x"))
        store.upsert(pod("b", ns="y"))
        store.upsert({"metadata": {"name": "n"}})
        assert store.get("x", "a") is not None
        assert store.get("y", "a") is None
        assert store.get(None, "n") is not None
        assert names(store.list(namespace="x")) == ["a"]
        assert len(store.list()) == 3


class TestIndexes:
    def test_owner_index_follows_the_controller_reference_only(self) -> None:
        store = Store()
        store.upsert(pod("a", owner="job-1"))
        store.upsert(pod("b", owner="job-1"))
        store.upsert(pod("c", owner="job-2"))
        assert names(store.by_owner_uid("job-1")) == ["a", "b"]
        assert store.by_owner_uid("not-the-controller") == []

    def test_index_moves_with_updates_and_forgets_deletes(self) -> None:
        store = Store()
        store.add_label_index(JOB_LABEL)
        store.upsert(pod("a", job="j1"))
        store.upsert(pod("a", job="j2", rv="2"))
        assert store.by_label(JOB_LABEL, "j1") == []
        assert names(store.by_label(JOB_LABEL, "j2")) == ["a"]
        store.remove(pod("a"))
        assert store.by_label(JOB_LABEL, "j2") == []
        assert store.index_values(f"label:{JOB_LABEL}") == []

    def test_index_added_late_covers_existing_objects(self) -> None:
        store = Store()
        store.upsert(pod("a", job="j1"))
        store.add_label_index(JOB_LABEL)
        assert names(store.by_label(JOB_LABEL, "j1")) == ["a"]

    def test_custom_multi_value_index(self) -> None:
        store = Store()
        store.add_index(
            "ns-and-name", lambda o: [o["metadata"]["namespace"], o["metadata"]["name"]]
        )
        store.upsert(pod("a", ns="x"))
        store.upsert(pod("b", ns="x"))
        assert names(store.by_index("ns-and-name", "x")) == ["a", "b"]
        assert store.index_keys("ns-and-name", "b") == ["x/b"]

    def test_many_objects_under_one_value_come_and_go(self) -> None:
        """A value's keys are held compactly while few and in a set when many (a node's
        pods): lookups are the same either way, through growth and shrinking."""
        store = Store()
        store.add_index("node", lambda o: [o["metadata"].get("labels", {}).get(JOB_LABEL, "")])
        every = [f"p{i:02d}" for i in range(20)]
        for name in every:
            store.upsert(pod(name, job="n1", owner="job-1"))
        assert names(store.by_index("node", "n1")) == every
        assert names(store.by_owner_uid("job-1")) == every
        for name in every[:18]:
            store.remove(pod(name))
        assert names(store.by_index("node", "n1")) == every[18:]
        store.upsert(pod("p19", job="n2", owner="job-2", rv="2"))
        assert names(store.by_index("node", "n1")) == ["p18"]
        assert names(store.by_owner_uid("job-2")) == ["p19"]
        store.remove(pod("p18"))
        store.remove(pod("p19"))
        assert store.index_values("node") == [] and store.index_values(OWNER_UID_INDEX) == []

    def test_unknown_index_and_duplicate_name(self) -> None:
        store = Store()
        with pytest.raises(KeyError):
            store.by_index("nope", "v")
        with pytest.raises(ValueError):
            store.add_index(OWNER_UID_INDEX, lambda o: [])


class TestReplace:
    def test_diff_reports_added_changed_and_vanished(self) -> None:
        store = Store()
        for obj in (pod("same", rv="1"), pod("changed", rv="1"), pod("gone", rv="1", owner="u")):
            store.upsert(obj)
        diff = store.replace([pod("same", rv="1"), pod("changed", rv="5"), pod("new", rv="6")])
        assert names(diff.added) == ["new"]
        assert [
            (o["metadata"]["resourceVersion"], n["metadata"]["resourceVersion"])
            for o, n in diff.updated
        ] == [("1", "5")]
        assert names(diff.deleted) == ["gone"]
        assert sorted(store.keys()) == ["ns/changed", "ns/new", "ns/same"]
        assert store.by_owner_uid("u") == []

    def test_replace_refreshes_indexes_of_changed_objects(self) -> None:
        store = Store()
        store.add_label_index(JOB_LABEL)
        store.upsert(pod("a", job="j1"))
        store.replace([pod("a", job="j2", rv="2")])
        assert store.by_label(JOB_LABEL, "j1") == []
        assert names(store.by_label(JOB_LABEL, "j2")) == ["a"]

    def test_replace_with_nothing_deletes_everything(self) -> None:
        store = Store()
        store.upsert(pod("a"))
        diff = store.replace([])
        assert names(diff.deleted) == ["a"]
        assert len(store) == 0


class TestOwnWrites:
    """The status writer stores the job its own PUT returned; a watch event must not take the
    store back to an older version of it (test_informer_loop.py has the informer's side)."""

    def test_only_integer_versions_of_the_same_object_compare(self) -> None:
        newer, older = pod("a", rv="100"), pod("a", rv="99")
        assert older_than_stored(older, newer)
        assert not older_than_stored(newer, older)
        assert not older_than_stored(older, None)
        assert not older_than_stored(pod("a", rv="x9"), newer)  # not an integer: never older
        recreated = pod("a", rv="99")
        recreated["metadata"]["uid"] = "another-uid"
        assert not older_than_stored(recreated, newer)  # another object under the same name
