"""The data a reconcile plan is made of: what was observed, what a framework adds, what to do.

Everything here is plain data. ``plan()`` (core/planner.py) turns a job, an :class:`Observed`
snapshot of the informer caches and the current time into a :class:`Plan`; the controller's
executor carries the plan out. Objects are raw JSON dicts as the apiserver returns them.
"""

from __future__ import annotations

import datetime as dt
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, ClassVar, Generic, Literal, Protocol, TypeVar

from msgspec import Struct, field
from typing_extensions import override

from jobcontroller.api.common import MAX_REPLICAS, JobModel, JobStatus
from jobcontroller.core.childspec import Children

Obj = dict[str, Any]

#: The largest object the API server can store: etcd's default ``--max-request-bytes``
#: (1.5 MiB). A pod over it is refused whatever is retried (``PlanConfig.max_object_bytes``).
MAX_OBJECT_BYTES = 1_572_864

#: Kinds the base knows how to create and delete. Frameworks may add others through
#: ``extra_objects`` as long as the controller was told their Resource (see JobController).
POD = "Pod"
SERVICE = "Service"
POD_GROUP = "PodGroup"


class JobMetric(StrEnum):
    """Counters a plan asks the controller to increment (training_operator_jobs_*_total)."""

    CREATED = "created"
    SUCCESSFUL = "successful"
    FAILED = "failed"
    RESTARTED = "restarted"
    DELETED = "deleted"


class CreateObject(Struct, frozen=True):
    """Create ``body`` (a complete object: apiVersion, kind, metadata with namespace, name,
    labels and the job's controller ownerReference)."""

    kind: str
    body: Obj
    expectation: str | None = None
    """Expectation key raised before the create and lowered when it fails."""
    after: tuple[tuple[str, str], ...] = ()
    """(kind, name) of objects this pass creates that must exist first (the ConfigMap and
    Secret a launcher Job mounts): it is created after them, and only if all were created."""

    @property
    def name(self) -> str:
        return str(self.body["metadata"]["name"])


class DeleteObject(Struct, frozen=True):
    """Delete one object, with a UID precondition so a same-named successor is never hit."""

    kind: str
    namespace: str
    name: str
    uid: str
    expectation: str | None = None
    reason: str = ""
    grace_period_seconds: int | None = None
    """0 to force-delete (a pod on a lost node: no kubelet will ever confirm a graceful
    deletion); None for the object's own grace period."""


class PatchObject(Struct, frozen=True):
    """Merge-patch an object the job owns (PodGroup spec, HPA bounds, ConfigMap data...) or
    the job itself (``kind`` is the job's Kind: the restart ledger annotations)."""

    kind: str
    namespace: str
    name: str
    patch: Obj
    can_wait: bool = False
    """It may wait while the API client's rate limiter is saturated (``Child.patch_can_wait``)."""


class DeleteJob(Struct, frozen=True):
    """Delete the job itself (its TTL after finishing has passed)."""


Action = CreateObject | DeleteObject | PatchObject | DeleteJob


class Event(Struct, frozen=True):
    """A core/v1 Event to record on the job."""

    type: Literal["Normal", "Warning"]
    reason: str
    message: str


class PlanConfig(Struct, frozen=True):
    """Operator-wide settings that shape plans (from flags)."""

    gang_scheduler_name: str = ""
    """``volcano`` -> Volcano PodGroups, any other non-empty value -> scheduler-plugins."""
    pod_group_available: bool = False
    """The selected PodGroup CRD is installed; gang scheduling is used only then."""
    cluster_domain: str = ""
    """Appended after ``svc`` in host names when set (env CUSTOM_CLUSTER_DOMAIN)."""
    max_writes_per_reconcile: int = 100
    """Creations and deletions one reconcile may plan. The rest waits for the next pass (the
    job goes to the back of the queue), so one job of 10,000 replicas neither starves the other
    jobs nor holds thousands of pod bodies (each with a cluster-wide TF_CONFIG) in memory at
    once: memory follows this number, not the replica count. The batch Job controller's is 500;
    ours is lower because a TFJob's pod body grows with the job's size."""
    max_bytes_per_reconcile: int = 16 * 2**20
    """Estimated bytes of pod bodies one reconcile may plan (``--max-bytes-per-reconcile``):
    a pass stops creating once its bodies exceed it, so a job of 1 MB pods never holds
    hundreds of them at once; 0 means no limit. A pass always plans at least one object."""
    max_pods_per_job: int = MAX_REPLICAS
    """A job asking for more pods than this fails validation with a message that says so
    (``--max-pods-per-job``), before anything is built; 0 means no limit. The default is the
    largest Indexed Job Kubernetes itself accepts (completions up to 100,000)."""
    max_object_bytes: int = MAX_OBJECT_BYTES
    """The largest object the API server stores (etcd's ``--max-request-bytes``, 1.5 MiB by
    default; ``--max-object-bytes``). A job whose pods would be larger (their cluster env
    lists every replica) fails validation before any pod is created: none could ever be
    stored."""
    create_failure_threshold: int = 3
    """Identical creation failures in a row after which the job shows them: a permanent error
    (the API server found the object invalid) fails the job with the server's message, any
    other (quota, an admission policy) puts the message on the Created condition with a
    Warning event, retried with backoff and cleared by the next successful creation."""
    node_lost_grace_seconds: float = 300.0
    """A pod whose node has not been Ready for this long, or whose node is gone, has failed
    with reason NodeLost (``--node-lost-grace-period``); 0 turns NodeLost handling off."""


class NodeState(Struct, frozen=True):
    """What the node informer keeps of a Node: whether it is Ready, and since when."""

    ready: bool
    since: dt.datetime | None = None
    """When the Ready condition last changed (the node's creation when it has none)."""


class CreateFailure(Struct, frozen=True):
    """The job's latest creation failure, as the executor saw it, and how often in a row."""

    kind: str
    name: str
    code: int
    """HTTP status of the refusal."""
    reason: str
    """The Status reason (``Invalid``, ``Forbidden``...)."""
    message: str
    count: int = 1
    permanent: bool = False
    """The object itself was refused (400/422 not from an admission plugin): sending the same
    object again can never succeed."""

    def same_cause(self, other: CreateFailure) -> bool:
        return (self.kind, self.code, self.reason) == (other.kind, other.code, other.reason)


class Observed(Struct, frozen=True):
    """What the informer caches hold for one job, at one instant.

    ``pods``, ``services`` and ``owned`` hold only objects whose controller ownerReference is
    this job (by UID). ``lookup(kind, name)`` returns any object of that kind with that name in
    the job's namespace, owned or not, so the planner can tell when a name it needs is taken by
    something that is not the job's (it then never touches it).
    """

    pods: Sequence[Obj] = ()
    services: Sequence[Obj] = ()
    owned: Mapping[str, Sequence[Obj]] = field(default_factory=dict)
    """Other owned objects by kind (PodGroup, ConfigMap, Secret, Job, HorizontalPodAutoscaler)."""
    lookup: Callable[[str, str], Obj | None] = lambda kind, name: None
    controlled_by: Callable[[str, str], Sequence[Obj]] = lambda kind, uid: ()
    """``controlled_by(kind, uid)``: cached objects of ``kind`` whose controller has ``uid``,
    to read the children of an owned object (the pods of MPI's launcher Job)."""
    create_failure: CreateFailure | None = None
    """The latest run of identical creation failures, until a creation succeeds."""
    node: Callable[[str], NodeState | None] | None = None
    """``node(name)``: the state of a node, None when no such node exists. The attribute is
    None when nodes are not watched (NodeLost is off) or their cache has not synced yet."""
    priority_classes: Mapping[str, int] = field(default_factory=dict)
    """PriorityClass name -> value, as the cluster has them, to order replica types when
    computing a PodGroup's minResources (read only when gang scheduling is on)."""
    crashes: int = 0
    """Times in a row the operator died while working on this job (core/crashes.py): from
    ``QUARANTINE_CRASHES`` on, an unfinished job is failed with reason OperatorCrashed
    instead of being planned."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """What a kind's controller reads for the job from caches of its own, by names it chooses
    (a TrainJob's runtime): :meth:`Reconciler.observed_extra`."""
    valid_spec: tuple[str, int] | None = None
    """(uid, generation) of the job as an earlier pass found it valid (``Plan.valid_spec``,
    remembered by the controller): its checks read only the spec, which a generation fixes, so
    they are not run again for it."""

    def owned_named(self, kind: str, name: str) -> Obj | None:
        """The job's own object of ``kind`` (one of ``owned``'s) named ``name``, if cached."""
        return next(
            (o for o in self.owned.get(kind, ()) if (o.get("metadata") or {}).get("name") == name),
            None,
        )


class StatusDoc(Protocol):
    """A planned status as the reconciler handles it, whatever the kind: a v1 job's
    :class:`~jobcontroller.api.common.JobStatus`, a TrainJob's status."""

    def to_dict(self) -> dict[str, Any]:
        """The status subresource's JSON form."""
        ...

    def is_condition_true(self, type_: str) -> bool: ...


class ServedKind(Protocol):
    """What the reconciler needs of a kind's model: where the kind is served."""

    GROUP: ClassVar[str]
    VERSION: ClassVar[str]
    KIND: ClassVar[str]
    PLURAL: ClassVar[str]


class Plan(Struct, frozen=True):
    """The outcome of planning one reconcile."""

    actions: tuple[Action, ...] = ()
    status: StatusDoc | None = None
    """The status the job should have; the controller writes it only if it differs."""
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None
    """Seconds until a timer (deadline, TTL, backoff) needs another look; None for no timer."""
    metrics: tuple[JobMetric, ...] = ()
    valid_spec: tuple[str, int] | None = None
    """(uid, generation) of the job when this pass checked it and found nothing to refuse or
    tolerate; for the controller to hand back as ``Observed.valid_spec``."""


class LifecycleWords(Struct, frozen=True):
    """What the Created, Suspended and Resumed conditions and their events say.

    The training-operator's words by default (:meth:`training_operator`); a framework whose
    anchor words them differently (mpi-operator) returns its own from
    :meth:`FrameworkOf.lifecycle_words`.
    """

    created: str
    suspended: str
    """The Suspended condition's message, and the event's."""
    running_suspended: str
    """Running=False's message while suspended."""
    resumed: str
    created_event: bool = False
    """Record a Normal ``<Kind>Created`` event with the Created condition."""
    running_false_when_suspended: bool = False
    """Set Running=False on suspension even when the job never ran (mpi-operator does)."""
    abnormal_pod_events: bool = True
    """Warn about active pods in trouble (v1.9's ``RecordAbnormalPods``; mpi-operator does
    not)."""

    @classmethod
    def training_operator(cls, kind: str, name: str) -> LifecycleWords:
        return cls(
            created=f"{kind} {name} is created.",
            suspended=f"{kind} {name} is suspended.",
            running_suspended=f"{kind} {name} is suspended.",
            resumed=f"{kind} {name} is resumed.",
        )


class GangFlavor(Struct, frozen=True):
    """How a framework's anchor builds its Volcano PodGroup and joins its pods to it.

    The training-operator's way by default; mpi-operator's is :meth:`mpi_operator`.
    """

    default_queue: str | None = "default"
    """The queue when nothing names one (mpi-operator leaves it to Volcano: None)."""
    queue_annotation: str | None = None
    """A job annotation naming the queue when the scheduling policy does not."""
    priority_from_templates: tuple[str, ...] = ()
    """Replica types whose template's ``priorityClassName`` is the group's, in this order,
    when the scheduling policy names none."""
    force_scheduler_name: bool = False
    """Overwrite a scheduler name the user set on a template (mpi-operator does; the
    training-operator keeps it and warns)."""
    task_spec_annotation: bool = True
    """Annotate pods with ``volcano.sh/task-spec`` (the training-operator does)."""

    @classmethod
    def mpi_operator(cls) -> GangFlavor:
        return cls(
            default_queue=None,
            queue_annotation="scheduling.volcano.sh/queue-name",
            priority_from_templates=("Launcher", "Worker"),
            force_scheduler_name=True,
            task_spec_annotation=False,
        )


class ReplicaPods(Struct, frozen=True):
    """The pods of one replica type, grouped by index (a slot may briefly hold two pods)."""

    rtype: str
    replicas: int
    by_index: Mapping[int, Sequence[Obj]]


class ExtraObjects(Struct, frozen=True):
    """What a framework's :meth:`FrameworkOf.extra_objects` decided."""

    actions: Sequence[Action] = ()
    events: Sequence[Event] = ()


JobT = TypeVar("JobT", bound=JobModel[Any])
"""A framework's own job model (``TFJob``...)."""


class FrameworkOf(ABC, Generic[JobT]):
    """What the pure planner asks a framework, answered as a framework that needs nothing
    special would. ``JobController[JobT]`` is one; a framework operator overrides the few hooks
    that differ, each marked ``@override`` (``typing_extensions.override``, re-exported by
    ``jobcontroller``), with its own job model as the type of ``job``. ``mypy --strict`` then
    checks every override's signature, and a hook marked ``@override`` whose name the base
    does not have is an error for mypy and, when the class is defined, a ``TypeError``.

    Every hook is pure: no I/O and no clock (``now`` is an argument where time matters). A hook
    changes nothing it was not given to change: ``set_cluster_spec`` edits its template copy,
    ``update_status`` the status; the others return what they decide.
    """

    model: type[JobT]
    framework_name: ClassVar[str]
    """The metrics label (``tensorflow``, ``pytorch``, ``mpi``)."""
    controller_name: ClassVar[str]
    """The ``training.kubeflow.org/operator-name`` label (``tfjob-controller``), the work
    queue's name and, unless ``event_component`` says otherwise, the Events' source."""

    @override
    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for name, member in vars(cls).items():
            marked = getattr(member, "__override__", False)  # set by @override
            if marked and not any(hasattr(base, name) for base in cls.__mro__[1:]):
                raise TypeError(
                    f"{cls.__qualname__}.{name} is marked @override, but no base class has a "
                    f"hook of that name (a misspelt hook would never be called)"
                )

    def set_defaults(self, job: JobT) -> JobT:
        """A defaulted copy of ``job``. Copy before writing: the model's templates are the
        informer's cached dicts (pydantic passes ``Any`` values through)."""
        return job

    def validate(self, job: JobT) -> list[str]:
        """Human-readable errors; non-empty fails the job with reason <Kind>FailedValidation."""
        return []

    def tolerated(self, job: JobT) -> list[str]:
        """Those of ``validate``'s errors that break rules the Go operator never checked.

        Admission refuses new jobs that break them, so a job that reaches the operator with
        one was stored before the swap: it gets a Warning event naming the rule and runs as
        the Go operator would have run it, instead of failing.
        """
        return []

    def pod_replica_types(self, job: JobT) -> list[str]:
        """Replica types the base runs as one pod (and one Service) per index, in order
        (``model.REPLICA_TYPES`` first, then any other the job has).

        MPIJob returns only ``Worker``: its launcher is a batch Job from ``children``.
        """
        specs = job.replica_specs()
        ordered = [rt for rt in self.model.REPLICA_TYPES if rt in specs]
        return ordered + sorted(rt for rt in specs if rt not in ordered)

    def is_master_role(self, job: JobT, rtype: str, index: int) -> bool:
        """Whether the pod of ``rtype`` and ``index`` is labelled ``job-role: master``."""
        return False

    def lifecycle_words(self, job: JobT) -> LifecycleWords:
        """The words of the Created, Suspended and Resumed conditions and events."""
        return LifecycleWords.training_operator(self.model.KIND, job.name)

    def replica_index_offset(self, job: JobT, rtype: str) -> int:
        """Added to a slot's index in its ``replica-index`` label (and Service selector); pod
        names keep the slot index. MPI workers start at 1 when the launcher is worker 0."""
        return 0

    def delegates_run_policy(self, job: JobT) -> bool:
        """True when backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished belong
        to an object the framework owns (MPI's launcher Job), so the base enforces none."""
        return False

    def services_for(self, job: JobT, rtype: str) -> bool:
        """Whether the base creates a headless Service per pod of ``rtype``."""
        return True

    def recreate_failed_pods(self, job: JobT, rtype: str) -> bool:
        """Whether a failed pod of ``rtype`` may be deleted for recreation (MPI workers: no)."""
        return True

    def gang_flavor(self, job: JobT) -> GangFlavor:
        """How the job's Volcano PodGroup is built and its pods joined to it."""
        return GangFlavor()

    def gang_objects(self, job: JobT, observed: Observed) -> list[tuple[str, Obj]]:
        """(kind, object) of the framework's own objects that a whole-gang restart deletes
        and recreates with the pods (MPI's launcher Job); each carries the gang generation
        annotation it was created in (core/gang.py)."""
        return []

    def gang_pods(self, job: JobT, observed: Observed) -> list[tuple[str, Obj]]:
        """(replica type, pod) of pods the base does not create but whose failure restarts
        the gang under that replica's restartPolicy (the pods of MPI's launcher Job)."""
        return []

    def set_cluster_spec(
        self, job: JobT, template: Obj, *, rtype: str, index: int, config: PlanConfig
    ) -> None:
        """Edit ``template``, the pod template copy of one replica: cluster env (TF_CONFIG,
        MASTER_ADDR...), init containers, hostname/subdomain, volumes."""
        return

    def cluster_env_bytes(self, job: JobT, rtype: str, *, config: PlanConfig) -> int:
        """The bytes (compact pod JSON) of what ``set_cluster_spec`` writes into the largest
        pod of ``rtype`` that grows with the job: env values listing replicas (TF_CONFIG,
        WORKER_ADDRS), counted once per container that gets them. Arithmetic in the number of
        replica types, never by building the values (core/sizing.py). 0 when nothing grows."""
        return 0

    @abstractmethod
    def update_status(
        self,
        job: JobT,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """Apply the framework's success and failure rule to ``status`` (in place); the one
        hook without a default.

        Called after the base has counted replica statuses and handled restarts, after
        ``children`` (a deciding child Job's rule has run: core/followjob.py) and
        ``extra_objects``; returns the events to record.
        """

    def children(
        self, job: JobT, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> Children:
        """The job's other children (ConfigMaps, Secrets, batch Jobs, an HPA...): the kinds
        managed this way and the objects of those kinds the job should have now. The base
        creates what is missing, patches drift back, deletes the unwanted and reports names
        held by others (core/children.py). Called when ``extra_objects`` is, before it, with
        the same ``status``: a suspended or finished job usually wants fewer children.
        """
        return Children()

    def extra_objects(
        self, job: JobT, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> ExtraObjects:
        """Actions on owned objects that ``children`` cannot declare, and events about them
        (``status`` is the planner's, to read; the status rule is ``update_status``'s, or a
        deciding child Job's).

        Called on every reconcile of a valid job: live, suspended (``status`` has
        Suspended=True: remove an HPA, suspend a launcher Job) or finished (Succeeded or
        Failed: clean up what cleanPodPolicy says).
        """
        return ExtraObjects()
