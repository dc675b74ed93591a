"""Gang scheduling of TrainJobs (a runtime's ``podGroupPolicy``): upstream's plugin test cases
(plugins/coscheduling/coscheduling_test.go ``TestCoScheduling``, plugins/volcano/volcano_test.go
``TestVolcano`` and ``TestValidate``) ported field for field, then the same through the
planner: the PodGroup a TrainJob owns, its pods' label or annotation, and what is refused.

Upstream's cases that make its API client fail (``failed to get PodGroup``) have no
counterpart: the planner reads caches. Their place is taken by a PodGroup CRD that is not
installed, the one read that can fail here."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from trainjob_fixtures import owner, trainjob

from jobcontroller import CreateObject, Observed, PatchObject
from trainer_operator.info import Info, PodSet, RuntimeProblem
from trainer_operator.podgroups import (
    COSCHEDULING_KIND,
    POD_GROUP_KINDS,
    PRIORITY_CLASS_EXISTS,
    VOLCANO_KIND,
    desired_pod_groups,
    enforce_pod_group_policy,
    pod_group_actions,
    pod_group_errors,
    pod_requests,
)

Obj = dict[str, Any]
PG_LABEL = "scheduling.x-k8s.io/pod-group"
VOLCANO_GROUP = "scheduling.k8s.io/group-name"
QUEUE = "scheduling.volcano.sh/queue-name"
BOTH = frozenset({COSCHEDULING_KIND, VOLCANO_KIND})
COSCHEDULING = {"coscheduling": {"scheduleTimeoutSeconds": 30}}


def _info(
    policy: Obj | None,
    pod_sets: tuple[tuple[str, int, Obj | None], ...] | list[tuple[str, int, Obj | None]] = (),
    *,
    annotations: dict[str, str] | None = None,
    priority: dict[str, str] | None = None,
) -> Info:
    """An Info as upstream's cases build one: pod sets of a count and one pod's requests."""
    jobs = []
    for name, _, requests in pod_sets:
        container: Obj = {"name": "c"}
        if requests is not None:
            container["resources"] = {"requests": requests}
        pod: Obj = {"containers": [container]}
        if priority and name in priority:
            pod["priorityClassName"] = priority[name]
        jobs.append({"name": name, "template": {"spec": {"template": {"spec": pod}}}})
    return Info(
        labels={},
        annotations=dict(annotations or {}),
        ml_policy=None,
        pod_group_policy=policy,
        spec={"replicatedJobs": jobs},
        pod_sets=[PodSet(name=n, ancestor=None, count=c) for n, c, _ in pod_sets],
    )


def _job(
    name: str = "trainJob", namespace: str = "default", uid: str = "trainJob", **spec: Any
) -> Obj:
    return trainjob(name, namespace=namespace, uid=uid, **spec)


def _owner(name: str, uid: str) -> Obj:
    return owner(name, uid)


def _cache(*pod_groups: tuple[str, Obj], kinds: frozenset[str] = BOTH) -> Observed:
    owned: dict[str, list[Obj]] = {}
    for kind, pg in pod_groups:
        owned.setdefault(kind, []).append(pg)
    return Observed(
        owned=owned,
        lookup=lambda kind, name: next(
            (o for o in owned.get(kind, ()) if o["metadata"]["name"] == name), None
        ),
        extra={POD_GROUP_KINDS: kinds},
    )


def _scheduler_plugins_pg(name: str, uid: str, spec: Obj, namespace: str = "default") -> Obj:
    return {
        "apiVersion": "scheduling.x-k8s.io/v1alpha1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"training.kubeflow.org/job-name": name},
            "ownerReferences": [_owner(name, uid)],
        },
        "spec": spec,
    }


# ----------------------------------------------------------------- TestCoScheduling


@pytest.mark.parametrize("policy", [None, {}], ids=["podGroupPolicy is nil", "coscheduling is nil"])
def test_coscheduling_no_action(policy: Obj | None) -> None:
    info = _info(policy, [("node", 2, None)])
    enforce_pod_group_policy(info, _job())
    assert info.pod_labels == {}
    assert info.pod_annotations == {}
    assert desired_pod_groups(info, _job()) == []
    assert pod_group_actions(info, _job(), _cache()) == []


@pytest.mark.parametrize(
    ("pod_sets", "min_member", "min_resources"),
    [
        pytest.param([("node", 1, None)], 1, {}, id="succeeded to build PodGroup"),
        pytest.param(
            [
                ("node", 2, {"cpu": "500m", "memory": "1Gi"}),
                ("dataset-initializer", 1, {"cpu": "250m", "memory": "512Mi"}),
            ],
            3,
            {"cpu": "1250m", "memory": "2560Mi"},  # 1.25 and 2.5Gi
            id="with multiple PodSets",
        ),
        pytest.param(
            [("node", 2, {"cpu": "500m", "memory": "1Gi"})],
            2,
            {"cpu": "1", "memory": "2Gi"},
            id="with MinResources",
        ),
    ],
)
def test_coscheduling_builds_the_pod_group(
    pod_sets: list[tuple[str, int, Obj | None]], min_member: int, min_resources: Obj
) -> None:
    info = _info(COSCHEDULING, pod_sets)
    job = _job()
    enforce_pod_group_policy(info, job)
    assert info.pod_labels == {PG_LABEL: "trainJob"}
    assert info.pod_annotations == {}
    want = _scheduler_plugins_pg(
        "trainJob",
        "trainJob",
        {"minMember": min_member, "minResources": min_resources, "scheduleTimeoutSeconds": 30},
    )
    assert desired_pod_groups(info, job) == [(COSCHEDULING_KIND, want)]
    assert pod_group_actions(info, job, _cache()) == [
        CreateObject(kind=COSCHEDULING_KIND, body=want)
    ]


@pytest.mark.parametrize(
    ("name", "have_spec"),
    [
        pytest.param(
            "trainJob",
            {"minMember": 1, "minResources": {}, "scheduleTimeoutSeconds": 30},
            id="PodGroup already exists and TrainJob is not suspended",
        ),
        pytest.param(
            "existingTrainJob",
            {
                "minMember": 2,
                "minResources": {"cpu": "1", "memory": "2Gi"},
                "scheduleTimeoutSeconds": 30,
            },
            id="TrainJob is not suspended",
        ),
    ],
)
def test_coscheduling_leaves_an_existing_pod_group_of_a_running_trainjob(
    name: str, have_spec: Obj
) -> None:
    info = _info(COSCHEDULING, [("node", 5, {"cpu": "3"})])
    job = _job(name, uid=name, suspend=False)
    enforce_pod_group_policy(info, job)
    assert info.pod_labels == {PG_LABEL: name}
    cache = _cache((COSCHEDULING_KIND, _scheduler_plugins_pg(name, name, have_spec)))
    assert pod_group_actions(info, job, cache) == []


def test_coscheduling_updates_the_pod_group_of_a_suspended_trainjob() -> None:
    """Upstream applies the whole PodGroup while suspended; here a merge patch of what
    differs (a resource no longer requested is removed)."""
    info = _info(COSCHEDULING, [("node", 4, {"cpu": "2"})])
    job = _job(suspend=True)
    have = _scheduler_plugins_pg(
        "trainJob",
        "trainJob",
        {
            "minMember": 2,
            "minResources": {"cpu": "4", "memory": "1Gi"},
            "scheduleTimeoutSeconds": 30,
        },
    )
    assert pod_group_actions(info, job, _cache((COSCHEDULING_KIND, have))) == [
        PatchObject(
            kind=COSCHEDULING_KIND,
            namespace="default",
            name="trainJob",
            patch={"spec": {"minMember": 4, "minResources": {"cpu": "8", "memory": None}}},
        )
    ]
    same = copy.deepcopy(have)
    same["spec"] = desired_pod_groups(info, job)[0][1]["spec"]
    assert pod_group_actions(info, job, _cache((COSCHEDULING_KIND, same))) == []


def test_a_pod_group_crd_not_installed_is_upstreams_no_match_error() -> None:
    info = _info(COSCHEDULING, [("node", 1, None)])
    with pytest.raises(RuntimeProblem) as err:
        pod_group_actions(info, _job(), _cache(kinds=frozenset({VOLCANO_KIND})))
    assert str(err.value) == (
        'no matches for kind "PodGroup" in version "scheduling.x-k8s.io/v1alpha1"'
    )
    volcano = _info({"volcano": {}}, [("node", 1, None)])
    with pytest.raises(RuntimeProblem, match=r'in version "scheduling\.volcano\.sh/v1beta1"'):
        pod_group_actions(volcano, _job(), _cache(kinds=frozenset({COSCHEDULING_KIND})))


def test_a_pod_group_another_object_controls_is_refused() -> None:
    info = _info(COSCHEDULING, [("node", 1, None)])
    theirs = _scheduler_plugins_pg("trainJob", "someone-else", {"minMember": 1})
    with pytest.raises(RuntimeProblem) as err:
        pod_group_actions(
            info,
            _job(),
            Observed(
                owned={},
                lookup=lambda kind, name: theirs if kind == COSCHEDULING_KIND else None,
                extra={POD_GROUP_KINDS: BOTH},
            ),
        )
    assert str(err.value) == (
        'Resource "trainJob" of Kind "PodGroup" already exists and is not managed by TrainJob '
        "default/trainJob"
    )


# ----------------------------------------------------------------- TestVolcano

_VOLCANO_SETS: list[tuple[str, int, Obj | None]] = [
    ("launcher", 1, {"cpu": "300m", "memory": "1Gi"}),
    ("worker", 4, {"cpu": "500m", "memory": "0.5Gi"}),
]


def _volcano_pg(name: str, namespace: str, uid: str, spec: Obj) -> Obj:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"training.kubeflow.org/job-name": name},
            "ownerReferences": [_owner(name, uid)],
        },
        "spec": spec,
    }


def test_volcano_injects_the_group_name_annotation() -> None:
    info = _info({"volcano": {}})
    job = _job("test-trainjob", namespace="", uid="")
    enforce_pod_group_policy(info, job)
    assert info.pod_annotations == {VOLCANO_GROUP: "test-trainjob"}
    assert info.pod_labels == {}
    want = _volcano_pg("test-trainjob", "", "", {"minMember": 0, "minResources": {}})
    assert pod_group_actions(info, job, _cache()) == [CreateObject(kind=VOLCANO_KIND, body=want)]


def test_volcano_leaves_the_pod_group_of_a_running_trainjob() -> None:
    info = _info({"volcano": {}}, _VOLCANO_SETS, priority={"launcher": "high-priority"})
    job = _job("job-exist-running", namespace="test-ns", uid="1", suspend=False)
    enforce_pod_group_policy(info, job)
    assert info.pod_annotations == {VOLCANO_GROUP: "job-exist-running"}
    have = _volcano_pg("job-exist-running", "test-ns", "1", {})
    assert pod_group_actions(info, job, _cache((VOLCANO_KIND, have))) == []


def test_volcano_builds_the_pod_group_of_a_suspended_trainjob() -> None:
    topology = {"mode": "hard", "highestTierAllowed": 1}
    info = _info(
        {"volcano": {"networkTopology": topology}},
        _VOLCANO_SETS,
        annotations={QUEUE: "q1"},
        priority={"launcher": "high-priority"},
    )
    job = _job("job-update", namespace="test-ns", uid="2", suspend=True)
    enforce_pod_group_policy(info, job)
    assert info.pod_annotations == {VOLCANO_GROUP: "job-update"}
    spec = {
        "minMember": 5,
        "minResources": {"cpu": "2300m", "memory": "3Gi"},
        "queue": "q1",
        "priorityClassName": "high-priority",
        "networkTopology": topology,
    }
    assert desired_pod_groups(info, job) == [
        (VOLCANO_KIND, _volcano_pg("job-update", "test-ns", "2", spec))
    ]
    have = _volcano_pg("job-update", "test-ns", "2", {})
    assert pod_group_actions(info, job, _cache((VOLCANO_KIND, have))) == [
        PatchObject(kind=VOLCANO_KIND, namespace="test-ns", name="job-update", patch={"spec": spec})
    ]


def test_volcano_keeps_a_queue_it_does_not_set() -> None:
    """A group created with no queue gets Volcano's default one: not patched away."""
    info = _info({"volcano": {}}, [("node", 1, None)])
    job = _job(suspend=True)
    have = _volcano_pg(
        "trainJob", "default", "trainJob", {"minMember": 1, "minResources": {}, "queue": "default"}
    )
    assert pod_group_actions(info, job, _cache((VOLCANO_KIND, have))) == []


def test_volcano_priority_class_is_the_last_replicated_jobs() -> None:
    info = _info(
        {"volcano": {}},
        [("a", 1, None), ("b", 1, None), ("c", 1, None)],
        priority={"a": "first", "b": "second"},
    )
    [(_, pg)] = desired_pod_groups(info, _job())
    assert pg["spec"]["priorityClassName"] == "second"


# ----------------------------------------------------------------- TestValidate


def _classes(*names: str) -> Observed:
    return Observed(extra={PRIORITY_CLASS_EXISTS: lambda name: name in names})


def test_validate_no_action_when_volcano_is_not_enabled() -> None:
    info = _info(None, annotations={QUEUE: ""}, priority={"node": "x"})
    assert pod_group_errors(info, _classes()) == []
    assert pod_group_errors(_info(COSCHEDULING, annotations={QUEUE: ""}), _classes()) == []


def test_validate_queue_annotation_is_empty() -> None:
    assert pod_group_errors(_info({"volcano": {}}, annotations={QUEUE: ""}), _classes()) == [
        "spec.annotations[scheduling.volcano.sh/queue-name]: Invalid value: Volcano queue name "
        "must not be empty"
    ]
    assert pod_group_errors(_info({"volcano": {}}, annotations={QUEUE: "q"}), _classes()) == []


def test_validate_priority_class_name_does_not_exist() -> None:
    info = _info({"volcano": {}}, [("node", 1, None)], priority={"node": "non-existent"})
    assert pod_group_errors(info, _classes()) == [
        'spec.templateSpec.priorityClassName: Invalid value: PriorityClass "non-existent" '
        'doesn\'t exist: priorityclasses.scheduling.k8s.io "non-existent" not found'
    ]


def test_validate_priority_class_name_exists() -> None:
    info = _info({"volcano": {}}, [("node", 1, None)], priority={"node": "existing-priority"})
    assert pod_group_errors(info, _classes("existing-priority")) == []


def test_validate_stops_at_a_system_priority_class_as_upstream_does() -> None:
    info = _info(
        {"volcano": {}},
        [("a", 1, None), ("b", 1, None), ("c", 1, None)],
        priority={"a": "missing-1", "b": "system-node-critical", "c": "missing-2"},
    )
    assert [e.split('"')[1] for e in pod_group_errors(info, _classes())] == ["missing-1"]


# ----------------------------------------------------------------- a pod's requests


@pytest.mark.parametrize(
    ("pod", "want"),
    [
        pytest.param(
            {"containers": [{"resources": {"limits": {"cpu": "2"}}}]}, {}, id="limits do not count"
        ),
        pytest.param(
            {
                "containers": [
                    {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                    {"resources": {"requests": {"cpu": "500m"}}},
                ],
                "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "512Mi"}}}],
            },
            {"cpu": "2", "memory": "1Gi"},
            id="the larger of the containers and an init container",
        ),
        pytest.param(
            {
                "containers": [{"resources": {"requests": {"cpu": "1"}}}],
                "initContainers": [
                    {"restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
                    {"resources": {"requests": {"cpu": "1500m"}}},
                ],
            },
            # The sidecar runs with the containers (2) and beside the later init (2.5).
            {"cpu": "2500m"},
            id="sidecars",
        ),
        pytest.param(
            {
                "resources": {"requests": {"cpu": "4", "example.com/foo": "1"}},
                "containers": [{"resources": {"requests": {"cpu": "1", "example.com/foo": "2"}}}],
                "overhead": {"cpu": "100m"},
            },
            {"cpu": "4100m", "example.com/foo": "2"},
            id="pod-level requests for cpu and memory only, and the overhead",
        ),
    ],
)
def test_pod_requests_are_kubernetes_pod_requests(pod: Obj, want: Obj) -> None:
    assert pod_requests(pod) == want
