"""MPIJob: the JobController hooks that reproduce mpi-operator v2beta1.

The base runs the workers (one pod per index, never recreated: retries are the launcher's).
The rest are children the base keeps as ``children`` declares them: the job-wide headless
Service, the ``<job>-config`` hostfile ConfigMap, the ``<job>-ssh`` Secret and the launcher, a
batch/v1 Job (the base's child Job: suspended, resumed and stopped with the MPIJob) that
carries runPolicy's backoffLimit, activeDeadlineSeconds and ttlSecondsAfterFinished.
The job's fate follows the launcher Job, declared as deciding (the base's rule:
core/followjob.py, its counts and verdict); eviction of a worker and the Running rule come from
the workers (``update_status``, which runs after it).

The SSH key pair is random, so the plan only asks for the Secret and :meth:`materialize` (run
by the executor just before the create) puts a fresh pair in it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping

import msgspec

from jobcontroller import (
    CONFIGMAPS,
    JOBS,
    MAX_CONFIGMAP_BYTES,
    POD,
    REASON_RUNNING,
    SECRETS,
    SERVICE,
    Child,
    Children,
    CreateObject,
    Event,
    ExtraObjects,
    GangFlavor,
    JobController,
    JobMetric,
    LifecycleWords,
    Obj,
    Observed,
    PlanConfig,
    ReplicaPods,
    Setup,
    batch_job_child,
    batch_job_done,
    is_finished,
    is_terminating,
    new_reason,
    override,
    phase,
    pod_reason,
    pods_in_range,
    replica_ready,
    replica_slots,
    set_condition,
    size_message,
)
from jobcontroller.api import (
    JobConditionType,
    JobStatus,
)
from mpi_operator.api import (
    LauncherCreationPolicy,
    MPIJob,
    MPIReplicaType,
    default_mpijob_in_place,
    validate_mpijob,
)
from mpi_operator.hostfile import (
    OPERATOR_NAME,
    config_map,
    config_map_bytes,
    config_map_name,
    job_service,
    launcher_name,
    object_metadata,
)
from mpi_operator.launcher import (
    configure_worker,
    launcher_template,
)
from mpi_operator.metrics import MPIOperatorMetrics
from mpi_operator.ssh import has_key_pair, secret_name, ssh_secret, with_key_pair

__all__ = ["MPIJobController"]

CONFIG_MAP, SECRET, JOB = CONFIGMAPS.kind, SECRETS.kind, JOBS.kind
REASON_EVICTED = "MPIJobEvicted"
_RESTART_POLICY = "Restart policy in pod template overridden by restart policy in replica spec"


class MPIJobController(JobController[MPIJob]):
    model = MPIJob
    framework_name = "mpi"
    controller_name = OPERATOR_NAME
    event_component = "mpi-job-controller"  # mpi-operator v0.8's controllerAgentName
    object_events = False  # mpi-operator v0.8 records no Event per created object
    owned_resources = {CONFIG_MAP: CONFIGMAPS, SECRET: SECRETS, JOB: JOBS}
    patched_children = frozenset({SERVICE})  # the job-wide Service's selector
    status_budget_of_its_own = True  # as mpi-operator v0.8's MPIJob clientset
    mpi_metrics: MPIOperatorMetrics | None = None

    @override
    def on_setup(self, setup: Setup) -> None:
        metrics = setup.metrics
        if metrics is None:
            return
        caches = setup.caches
        self.mpi_metrics = MPIOperatorMetrics(
            metrics.registry,
            jobs=caches.jobs,
            launcher_exists=lambda ns, name: caches.get(JOB, ns, name) is not None,
            is_leader=setup.is_leader,
        )
        metrics.on_scrape(self.mpi_metrics.families)

    @override
    def counted(self, job: Obj, metrics: tuple[JobMetric, ...]) -> None:
        if self.mpi_metrics is not None:
            self.mpi_metrics.counted(metrics)

    # ------------------------------------------------------------------ base hooks

    @override
    def set_defaults(self, job: MPIJob) -> MPIJob:
        # The planner parses the job afresh for each pass: no copy to protect.
        return default_mpijob_in_place(job)

    @override
    def validate(self, job: MPIJob) -> list[str]:
        errors = validate_mpijob(job)
        if errors:
            return errors
        size = config_map_bytes(job, cluster_domain=self.config.cluster_domain)
        if size > MAX_CONFIGMAP_BYTES:
            # A hostfile that no ConfigMap can hold: the launcher could never start.
            errors.append(
                size_message(
                    what=f"its hostfile ConfigMap {config_map_name(job)}",
                    size=size,
                    limit=MAX_CONFIGMAP_BYTES,
                    setting="of a ConfigMap's data",
                    why="it lists every worker",
                )
            )
        return errors

    @override
    def pod_replica_types(self, job: MPIJob) -> list[str]:
        return [MPIReplicaType.WORKER]  # the launcher is a batch Job

    @override
    def services_for(self, job: MPIJob, rtype: str) -> bool:
        return False  # one job-wide Service instead of one per pod

    @override
    def recreate_failed_pods(self, job: MPIJob, rtype: str) -> bool:
        return False

    @override
    def delegates_run_policy(self, job: MPIJob) -> bool:
        return True

    @override
    def gang_objects(self, job: MPIJob, observed: Observed) -> list[tuple[str, Obj]]:
        """A whole-gang restart deletes the launcher Job (its pods go with it) too."""
        launcher = observed.owned_named(JOB, launcher_name(job))
        return [(JOB, launcher)] if launcher is not None else []

    @override
    def gang_pods(self, job: MPIJob, observed: Observed) -> list[tuple[str, Obj]]:
        """The launcher's pods: under restartScope All its Job never retries them itself
        (backoffLimit 0), their failure restarts the gang by the Launcher's restartPolicy."""
        launcher = observed.owned_named(JOB, launcher_name(job))
        if launcher is None:
            return []
        uid = str(launcher.get("metadata", {}).get("uid", ""))
        return [(MPIReplicaType.LAUNCHER, pod) for pod in observed.controlled_by(POD, uid)]

    @override
    def lifecycle_words(self, job: MPIJob) -> LifecycleWords:
        """mpi-operator v0.8's words: the Created condition names the job with its namespace
        and has an event of its own; Suspended says "MPIJob suspended" / "MPIJob resumed"; and
        Running turns False ("... is suspended.") on suspension even if the job never ran."""
        return LifecycleWords(
            created=f"MPIJob {job.key} is created.",
            suspended="MPIJob suspended",
            running_suspended=f"MPIJob {job.key} is suspended.",
            resumed="MPIJob resumed",
            created_event=True,
            running_false_when_suspended=True,
            abnormal_pod_events=False,
        )

    @override
    def gang_flavor(self, job: MPIJob) -> GangFlavor:
        """mpi-operator's PodGroup: the queue from ``scheduling.volcano.sh/queue-name`` (the
        scheduling policy's wins), the priority class from the launcher's or the workers'
        template, and the scheduler name forced on every pod."""
        return GangFlavor.mpi_operator()

    @override
    def replica_index_offset(self, job: MPIJob, rtype: str) -> int:
        # A launcher that also works is index 0 of the hosts, so workers count from 1.
        return 1 if job.spec.run_launcher_as_worker else 0

    @override
    def set_cluster_spec(
        self, job: MPIJob, template: Obj, *, rtype: str, index: int, config: PlanConfig
    ) -> None:
        configure_worker(template, job=job, index=index, config=config)

    @override
    def materialize(self, action: CreateObject) -> CreateObject:
        if action.kind == SECRET and not has_key_pair(action.body):
            return msgspec.structs.replace(action, body=with_key_pair(action.body))
        return action

    # ------------------------------------------------------------------ owned objects

    @override
    def children(
        self, job: MPIJob, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> Children:
        """The job-wide Service, the hostfile ConfigMap and the SSH Secret, kept while the job
        runs and its launcher has not finished (then they are left as they are); and the
        launcher Job, suspended and resumed with the job, stopped at clean-up, whose end is the
        job's (the base's rule: core/followjob.py)."""
        launcher = observed.owned_named(JOB, launcher_name(job))
        workers = self._workers(job, observed)
        wanted: list[Child] = []
        if not is_finished(status) and not (launcher is not None and batch_job_done(launcher)):
            running = [_name(pod) for pod in pods_in_range(workers) if phase(pod) == "Running"]
            hosts = config_map(
                job, running_workers=running, cluster_domain=self.config.cluster_domain
            )
            service_drift = ("spec.selector", "spec.publishNotReadyAddresses")
            # discover_hosts.sh, rewritten as workers come and go, is read by polling (Elastic
            # Horovod): under a saturated client it waits for the workers' and launchers'
            # creations, and a finished launcher's never goes out.
            wanted += [
                _child(job.name, job_service(job), drift=service_drift),
                msgspec.structs.replace(
                    _child(config_map_name(job), hosts, drift=("data",)), patch_can_wait=True
                ),
                _child(secret_name(job), ssh_secret(job), drift=(), valid=has_key_pair),
            ]
        # A replacement pod starts only once the failed one is gone: two launchers would run
        # two mpiruns against the same workers.
        config = self.config
        child = batch_job_child(
            job,
            observed,
            status,
            name=launcher_name(job),
            spec=lambda: {
                "podReplacementPolicy": "Failed",
                "template": launcher_template(job, config=config).body,
            },
            metadata=object_metadata(job),
            rtype=MPIReplicaType.LAUNCHER,
            decides=True,
            carries_run_policy=True,
            create=self._may_create_launcher(job, observed, workers),
            hold=not _may_run(job, workers),
        )
        wanted.append(
            msgspec.structs.replace(
                child,
                operator_label=False,
                conflict_blocks_creation=True,
                after=_mounts(job),
            )
        )
        kinds = frozenset({SERVICE, CONFIG_MAP, SECRET, JOB})
        return Children(kinds=kinds, wanted=wanted, delete_unwanted=False)

    def _workers(self, job: MPIJob, observed: Observed) -> ReplicaPods:
        offset = self.replica_index_offset(job, MPIReplicaType.WORKER)
        return replica_slots(job, observed.pods, rtype=MPIReplicaType.WORKER, offset=offset)

    def _may_create_launcher(self, job: MPIJob, observed: Observed, workers: ReplicaPods) -> bool:
        """Its mounts first, so the pod does not start without them: each the job's in the
        caches, or none in its way (the same pass creates it, and the launcher after it, as
        mpi-operator's one sync does). Suspended: created suspended, except under
        WaitForWorkersReady where it waits for workers that a suspended job does not have
        (mpi-operator #615)."""
        for kind, name in _mounts(job):
            if observed.owned_named(kind, name) is None and observed.lookup(kind, name) is not None:
                return False
        if job.spec.run_policy.suspend:
            return not _waits_for_workers(job)
        return _may_run(job, workers)

    @override
    def extra_objects(
        self, job: MPIJob, observed: Observed, status: JobStatus, *, now: dt.datetime
    ) -> ExtraObjects:
        """mpi-operator's warning when it creates the launcher from a template that sets its
        own restartPolicy (the replica's wins)."""
        if is_finished(status) or observed.owned_named(JOB, launcher_name(job)) is not None:
            return ExtraObjects()
        workers = self._workers(job, observed)
        if not self._may_create_launcher(job, observed, workers):
            return ExtraObjects()
        if not launcher_template(job, config=self.config).template_restart_policy:
            return ExtraObjects()
        return ExtraObjects(
            events=[Event("Warning", "SetPodTemplateRestartPolicy", _RESTART_POLICY)]
        )

    # ------------------------------------------------------------------ status

    @override
    def update_status(
        self,
        job: MPIJob,
        status: JobStatus,
        *,
        replicas: Mapping[str, ReplicaPods],
        now: dt.datetime,
    ) -> list[Event]:
        """Worker-side rules; the launcher's verdict is the base's (core/followjob.py)."""
        if is_finished(status):
            return []
        slots = replicas.get(MPIReplicaType.WORKER)
        workers = pods_in_range(slots) if slots is not None else []
        evicted = sum(
            1 for pod in workers if phase(pod) == "Failed" and pod_reason(pod) == "Evicted"
        )
        if evicted:
            message = f"{evicted}/{len(workers)} workers are evicted"
            set_condition(
                status,
                cond_type=JobConditionType.FAILED,
                reason=REASON_EVICTED,
                message=message,
                now=now,
            )
            return [Event("Warning", REASON_EVICTED, message)]
        launcher = status.replica_statuses.get(MPIReplicaType.LAUNCHER)
        running = sum(1 for pod in workers if phase(pod) == "Running" and not is_terminating(pod))
        wanted = slots.replicas if slots is not None else 0
        if launcher is not None and launcher.active >= 1 and running == wanted:
            message = f"MPIJob {job.key} is running."
            reason = new_reason(MPIJob.KIND, REASON_RUNNING)
            if set_condition(
                status, cond_type=JobConditionType.RUNNING, reason=reason, message=message, now=now
            ):
                return [Event("Normal", reason, message)]
        return []


# ---------------------------------------------------------------------- helpers


def _child(
    name: str, body: Obj, *, drift: tuple[str, ...], valid: Callable[[Obj], bool] | None = None
) -> Child:
    """One of MPI's objects as a child: its own labels only, conflicts on the Created
    condition, a key-less Secret replaced (the create gets a fresh pair)."""
    return Child(
        kind=body["kind"],
        name=name,
        body=body,
        drift=drift,
        prune=True,
        conflict_blocks_creation=True,
        valid=valid,
        invalid_reason="incomplete ssh key pair",
        operator_label=False,
    )


def _mounts(job: MPIJob) -> tuple[tuple[str, str], ...]:
    """The objects the launcher's pod mounts: the hostfile ConfigMap and the SSH Secret."""
    return ((CONFIG_MAP, config_map_name(job)), (SECRET, secret_name(job)))


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _waits_for_workers(job: MPIJob) -> bool:
    return job.spec.launcher_creation_policy == LauncherCreationPolicy.WAIT_FOR_WORKERS_READY


def _may_run(job: MPIJob, workers: ReplicaPods) -> bool:
    """The launcher may start: at once, or under WaitForWorkersReady once they all are."""
    return not _waits_for_workers(job) or replica_ready(workers)
