"""Gang scheduling of TrainJobs through the planner and the controller: the PodGroup a
TrainJob owns (minMember and minResources after the ML policy and ``resourcesPerNode``), its
pods' label or annotation in the JobSet, what is refused (Volcano's checks, a PodGroup CRD not
installed), the update while suspended, and which PodGroup kinds the controller watches. The
plugins' own cases are test_trainjob_podgroups.py."""

from __future__ import annotations

from typing import Any

import pytest
from trainjob_fixtures import NOW, jobset_spec, observed, owner, runtime, stored, trainjob

from jobcontroller import CreateObject, Event, Observed, PatchObject, Plan, Settings
from trainer_operator.controller import TrainJobController
from trainer_operator.planner import plan_trainjob
from trainer_operator.podgroups import (
    COSCHEDULING_KIND,
    POD_GROUP_KINDS,
    PRIORITY_CLASS,
    PRIORITY_CLASS_EXISTS,
    VOLCANO_KIND,
)

Obj = dict[str, Any]
PG_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
BOTH = frozenset({COSCHEDULING_KIND, VOLCANO_KIND})
COSCHEDULING = {"coscheduling": {"scheduleTimeoutSeconds": 30}}


def _runtime_with(policy: Obj, *, annotations: dict[str, str] | None = None) -> Obj:
    spec = jobset_spec()
    node = spec["replicatedJobs"][2]["template"]["spec"]["template"]["spec"]["containers"][0]
    node["resources"] = {"requests": {"cpu": "1"}}
    rt = runtime(
        spec,
        ml_policy={"numNodes": 1, "torch": {}},
        template_meta={"annotations": annotations} if annotations else None,
    )
    rt["spec"]["podGroupPolicy"] = policy
    return rt


def _plan(
    raw: Obj,
    rt: Obj,
    *,
    kinds: frozenset[str] = BOTH,
    classes: tuple[str, ...] = (),
    pod_groups: tuple[tuple[str, Obj], ...] = (),
    jobsets: tuple[Obj, ...] = (),
) -> Plan:
    cache = observed(runtime=rt, jobsets=list(jobsets))
    owned = dict(cache.owned)
    for kind, pg in pod_groups:
        owned.setdefault(kind, []).append(pg)
    cache = Observed(
        owned=owned,
        lookup=cache.lookup,
        extra={
            **cache.extra,
            POD_GROUP_KINDS: kinds,
            PRIORITY_CLASS_EXISTS: lambda name: name in classes,
        },
    )
    return plan_trainjob(raw, cache, now=NOW)


def _created(plan: Plan, kind: str) -> list[Obj]:
    return [a.body for a in plan.actions if isinstance(a, CreateObject) and a.kind == kind]


def _templates(jobset: Obj) -> list[Obj]:
    return [r["template"]["spec"]["template"] for r in jobset["spec"]["replicatedJobs"]]


def test_a_coscheduling_trainjob_gets_its_pod_group_and_labelled_pods() -> None:
    raw = trainjob(
        trainer={"numNodes": 3, "resourcesPerNode": {"requests": {"cpu": "2", "memory": "4Gi"}}}
    )
    plan = _plan(raw, _runtime_with({"coscheduling": {"scheduleTimeoutSeconds": 120}}))
    [pg] = _created(plan, COSCHEDULING_KIND)
    # 3 nodes at 2 CPUs and 4Gi (resourcesPerNode over the runtime's 1 CPU) and the two
    # initializers (no requests).
    assert pg["spec"] == {
        "minMember": 5,
        "minResources": {"cpu": "6", "memory": "12Gi"},
        "scheduleTimeoutSeconds": 120,
    }
    assert pg["metadata"]["ownerReferences"] == [owner()]
    [jobset] = _created(plan, "JobSet")
    for template in _templates(jobset):
        assert template["metadata"]["labels"][PG_LABEL] == "test-job"
        assert VOLCANO_GROUP not in (template["metadata"].get("annotations") or {})
    kinds = [a.kind for a in plan.actions if isinstance(a, CreateObject)]
    assert kinds.index(COSCHEDULING_KIND) < kinds.index("JobSet")


def test_a_volcano_trainjob_gets_its_pod_group_and_annotated_pods() -> None:
    rt = _runtime_with(
        {"volcano": {"networkTopology": {"mode": "soft", "highestTierAllowed": 2}}},
        annotations={QUEUE: "team-a"},
    )
    plan = _plan(trainjob(trainer={"numNodes": 2}), rt)
    [pg] = _created(plan, VOLCANO_KIND)
    assert pg["spec"] == {
        "minMember": 4,
        "minResources": {"cpu": "2"},
        "queue": "team-a",
        "networkTopology": {"mode": "soft", "highestTierAllowed": 2},
    }
    [jobset] = _created(plan, "JobSet")
    for template in _templates(jobset):
        assert template["metadata"]["annotations"][VOLCANO_GROUP] == "test-job"
        assert PG_LABEL not in (template["metadata"].get("labels") or {})
    assert jobset["metadata"]["annotations"] == {QUEUE: "team-a"}


def _refused(plan: Plan) -> list[str]:
    assert not [a for a in plan.actions if isinstance(a, CreateObject)], "nothing is created"
    return [e.message for e in plan.events if isinstance(e, Event)]


def test_a_volcano_trainjob_with_an_empty_queue_or_a_missing_priority_class_is_refused() -> None:
    rt = _runtime_with({"volcano": {}}, annotations={QUEUE: ""})
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][2]["template"]["spec"]["template"][
        "spec"
    ]
    pod["priorityClassName"] = "gold"
    [message] = _refused(_plan(trainjob(), rt))
    assert message == (
        "TrainJob resources reconciliation failed: spec.annotations[scheduling.volcano.sh/"
        "queue-name]: Invalid value: Volcano queue name must not be empty; "
        'spec.templateSpec.priorityClassName: Invalid value: PriorityClass "gold" doesn\'t '
        'exist: priorityclasses.scheduling.k8s.io "gold" not found'
    )
    rt["spec"]["template"]["metadata"]["annotations"][QUEUE] = "q"
    plan = _plan(trainjob(), rt, classes=("gold",))
    assert _created(plan, VOLCANO_KIND)[0]["spec"]["priorityClassName"] == "gold"


def test_a_trainjob_whose_pod_group_crd_is_missing_gets_no_jobset() -> None:
    plan = _plan(trainjob(), _runtime_with(COSCHEDULING), kinds=frozenset())
    assert _refused(plan) == [
        'TrainJob resources reconciliation failed: no matches for kind "PodGroup" in '
        'version "scheduling.x-k8s.io/v1alpha1"'
    ]


def test_a_runtime_without_a_pod_group_policy_makes_no_pod_group() -> None:
    plan = _plan(trainjob(), _runtime_with({}), kinds=frozenset())
    [jobset] = _created(plan, "JobSet")
    assert not [a for a in plan.actions if getattr(a, "kind", "").startswith("PodGroup")]
    for template in _templates(jobset):
        meta = template.get("metadata") or {}
        assert PG_LABEL not in (meta.get("labels") or {})
        assert VOLCANO_GROUP not in (meta.get("annotations") or {})


def test_a_suspended_trainjob_brings_its_pod_group_to_the_new_node_count() -> None:
    """While suspended (Kueue's waiting TrainJob), the PodGroup follows what the TrainJob
    says; once resumed it is left alone, as v2.3.0 does."""
    rt = _runtime_with(COSCHEDULING)
    raw = trainjob(suspend=True, trainer={"numNodes": 2})
    first = _plan(raw, rt)
    [pg] = _created(first, COSCHEDULING_KIND)
    [jobset] = _created(first, "JobSet")
    raw["spec"]["trainer"]["numNodes"] = 4
    plan = _plan(raw, rt, pod_groups=((COSCHEDULING_KIND, stored(pg)),), jobsets=(stored(jobset),))
    patches = [a for a in plan.actions if isinstance(a, PatchObject)]
    # (numNodes is immutable in the API; a planner that is handed a new one follows it.)
    assert [p.kind for p in patches] == [COSCHEDULING_KIND]
    assert patches[0] == PatchObject(
        kind=COSCHEDULING_KIND,
        namespace="default",
        name="test-job",
        patch={"spec": {"minMember": 6, "minResources": {"cpu": "4"}}},
    )
    # Resumed, the PodGroup is left as it is (v2.3.0's rule), whatever the TrainJob says.
    raw["spec"]["suspend"] = False
    raw["spec"]["trainer"]["numNodes"] = 1
    resumed = _plan(
        raw, rt, pod_groups=((COSCHEDULING_KIND, stored(pg)),), jobsets=(stored(jobset),)
    )
    assert not [a for a in resumed.actions if getattr(a, "kind", "") == COSCHEDULING_KIND]


# ----------------------------------------------------------------- the controller


def test_the_controller_watches_only_installed_pod_group_kinds() -> None:
    assert not {COSCHEDULING_KIND, VOLCANO_KIND} & set(TrainJobController()._resources)
    only = TrainJobController(pod_groups={VOLCANO_KIND})
    assert VOLCANO_KIND in only._resources
    assert COSCHEDULING_KIND not in only._resources
    both = TrainJobController(pod_groups=BOTH)
    assert {COSCHEDULING_KIND, VOLCANO_KIND} <= set(both._resources)
    assert PRIORITY_CLASS in TrainJobController.read_resources


def test_the_pod_group_crds_are_looked_up_and_an_unanswered_lookup_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A CRD that is not there is left out; a lookup the API server did not answer (None, it
    is restarting) is asked again until it answers, and one never answered within the
    patience counts as not installed: an informer of a kind that does not exist never syncs,
    and the operator would never start (the chaos suite's API-server restart found it)."""
    import trainer_operator.controller as controller

    replies = {
        "podgroups.scheduling.x-k8s.io": [None, None, True],
        "podgroups.scheduling.volcano.sh": [False],
    }
    asked: list[list[str]] = []
    clock = [0.0]

    def lookup_crds(settings: object, names: list[str]) -> dict[str, bool | None]:
        asked.append(list(names))
        answers = {}
        for name in names:
            queue = replies[name]
            answers[name] = queue.pop(0) if len(queue) > 1 else queue[0]
        return answers

    def sleep(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(controller, "lookup_crds", lookup_crds)
    monkeypatch.setattr(controller.time, "sleep", sleep)
    monkeypatch.setattr(controller.time, "monotonic", lambda: clock[0])
    assert controller.installed_pod_groups(Settings()) == {COSCHEDULING_KIND}
    # Both asked at once; then only the unanswered one, until it answers.
    assert asked == [
        ["podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh"],
        ["podgroups.scheduling.x-k8s.io"],
        ["podgroups.scheduling.x-k8s.io"],
    ]

    # Answers already at hand (the all-in-one's lookup with JobSet's CRDs) are not asked again.
    asked.clear()
    known = {"podgroups.scheduling.x-k8s.io": True, "podgroups.scheduling.volcano.sh": True}
    assert controller.installed_pod_groups(Settings(), known) == {COSCHEDULING_KIND, VOLCANO_KIND}
    assert asked == []

    # Answers at hand with one unanswered: that one is asked again after the pause, not at
    # once, and the other is taken as it is.
    asked.clear()
    clock[0] = 0.0
    replies["podgroups.scheduling.x-k8s.io"] = [True]
    known = {"podgroups.scheduling.x-k8s.io": None, "podgroups.scheduling.volcano.sh": False}
    assert controller.installed_pod_groups(Settings(), known) == {COSCHEDULING_KIND}
    assert asked == [["podgroups.scheduling.x-k8s.io"]]
    assert clock[0] == 1.0

    # Never answered: not installed, after waiting out the patience, not forever.
    replies["podgroups.scheduling.x-k8s.io"] = [None]
    replies["podgroups.scheduling.volcano.sh"] = [True]
    clock[0] = 0.0
    assert controller.installed_pod_groups(Settings()) == {VOLCANO_KIND}
    assert controller.LOOKUP_PATIENCE_SECONDS <= clock[0] <= controller.LOOKUP_PATIENCE_SECONDS + 1
