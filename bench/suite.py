"""`make bench`: the operators' speed, cost and footprint, each scenario on a fresh local cluster.

Every run of every contender gets a cluster of its own (etcd, kube-apiserver with an audit log of
every request, controller-manager, scheduler, kwok with 4 simulated nodes), so nothing one leaves
behind is in the next one's caches. Before an operator starts, a dry-run create of the
scenario's first job waits out a fresh API server's pause at its first custom-resource write
(:func:`settle_first_write`), and every resource either operator reads is read once from
its watch cache (:func:`warm_apiserver`): a running cluster has neither pause. Contenders:

- ``ours``: the default install's process, ``training-operator`` serving all six kinds, as
  the Go training-operator does; for MPIJob our ``mpi-operator``, serving MPIJob alone as the
  Go mpi-operator does, and ``ours-all`` the all-in-one ``training-operator`` beside it;
- ``bare``: a bare client (our ``KubeApi``, nothing else) creating exactly the objects the
  operator would create for the same jobs (rendered offline by ``kfjob``'s planner, owner
  references removed) at the same QPS and burst: the floor any operator can reach;
- ``go``: the Go training-operator v1.9.4 (and for MPIJob, mpi-operator v0.8.2), when their
  binaries are built (see ``hack/anchor_record.py`` for v1.9.4; mpi-operator: ``go build -o
  ~/.cache/jobcontroller/anchors/mpi-operator-v0.8.2 ./cmd/mpi-operator`` in its v0.8 source;
  without Go, ``export PATH=$(bash hack/ensure-go.sh | tail -n1):$PATH`` first).
  ``BENCH_GO=0`` skips them, and ``BENCH_BARE=0`` the bare client (an A/B of ours alone).

Scenarios: ``tfjobs-qps20`` and ``tfjobs-qps200`` (100 TFJobs of 1 PS + 3 workers submitted at
once; pods exit 0 after 2 s), ``mpijobs`` (50 MPIJobs of 2 workers and a launcher at QPS 20),
``idle`` (RSS, CPU and time from exec to ready with nothing to do), ``scale`` (2,000 TFJobs of
5 pods: RSS with 10k pods and 10k services in the caches; no scheduler, the pods stay Pending)
and ``timers`` (activeDeadlineSeconds and ttlSecondsAfterFinished: delay after due); opt-in,
only when named, ``scale-50k`` (``bench/scale50k.py``: 10,000 PyTorchJobs, 50,000 pods Running
on kwok, RSS per cached object and creation-to-Running latency). Measured:
time to all pods (from the first job's create to the last pod's, both from the audit log; for
``bare``, from its first create), time to all jobs done, the operator's CPU (``/proc``, from ready
to the end) and peak RSS, requests by verb and resource (audit log), Events stored (with their
counts) and lost (the recorder's warnings), and for ours in a burst the event loop's sleeps
(``extra.loop_sleeps_submit_to_done_3s``: each a wake-up that costs CPU). Each scenario writes
``bench/results/<name>.json`` and ``<name>.png``; ``summary.md`` holds the table the README
shows.

    make bench                                   # everything (about 20 minutes on 2 cores)
    uv run --group bench python bench/suite.py tfjobs-qps20 timers   # some scenarios
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import datetime as dt
import json
import os
import re
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.apitypes import (
    CONFIGMAPS,
    EVENTS,
    HPAS,
    JOBS,
    NAMESPACES,
    NODES,
    PODS,
    SECRETS,
    SERVICES,
    Resource,
)
from jobcontroller.runtime.kube import ApiError, KubeApi
from jobcontroller.testing.controlplane import ControlPlane
from jobcontroller.testing.operator import install_crds
from jobcontroller.testing.pods import simulate
from jobcontroller.testing.ports import free_port
from jobcontroller.testing.processes import OperatorProcess

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
ANCHORS = Path.home() / ".cache" / "jobcontroller" / "anchors"
GO_TRAINING = ANCHORS / "training-operator-v1.9.4"
GO_MPI = ANCHORS / "mpi-operator-v0.8.2"
NS = "bench"
OPERATOR_NAMESPACE = "kubeflow"  # ours, as deployed: its progress certificate's Secret
TFJOBS = Resource("kubeflow.org", "v1", "TFJob", "tfjobs")
MPIJOBS = Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs")
LEASES = Resource("coordination.k8s.io", "v1", "Lease", "leases")
Obj = dict[str, Any]

DRIVER = "bench:driver"
MEASURED = {"ours": "bench:ours", "bare": "bench:bare", "go": "bench:go"}
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [
        {"level": "Metadata", "users": [DRIVER, *MEASURED.values()]},
        # Pods made by the controller-manager (MPI launchers) count towards "all pods".
        {
            "level": "Metadata",
            "resources": [{"group": "", "resources": ["pods"]}],
            "verbs": ["create"],
        },
        {"level": "None"},
    ],
}


# -- the cluster ----------------------------------------------------------------------------


class Cluster:
    """A fresh audited cluster; ``user(name)`` is a kubeconfig for ``name`` in system:masters."""

    def __init__(
        self,
        workdir: Path,
        *,
        scheduler: bool = True,
        kwok_nodes: int | None = None,
        extra_etcd_args: list[str] | None = None,
    ) -> None:
        """``kwok_nodes``: that many kwok nodes even without a scheduler (pods that name their
        node in ``nodeName``); by default 4 with the scheduler, none without."""
        nodes = (4 if scheduler else 0) if kwok_nodes is None else kwok_nodes
        workdir.mkdir(parents=True, exist_ok=True)
        policy = workdir / "audit-policy.yaml"
        policy.write_text(yaml.safe_dump(AUDIT_POLICY))
        self.audit_log = workdir / "audit.log"
        self.workdir = workdir
        self.plane = ControlPlane(
            controller_manager=scheduler,
            scheduler=scheduler,
            kwok=scheduler or nodes > 0,
            nodes=nodes,
            workdir=workdir / "cluster",
            extra_etcd_args=extra_etcd_args or [],
            extra_apiserver_args=[
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json",
                "--audit-log-mode=batch",
                "--audit-log-batch-max-wait=1s",
                "--audit-log-maxsize=0",
                # 2,000 jobs at once: do not let the server's own limits be the bottleneck.
                "--max-requests-inflight=1000",
                "--max-mutating-requests-inflight=500",
            ],
        )

    def __enter__(self) -> Cluster:
        self.plane.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.plane.__exit__(*exc)

    def user(self, name: str) -> Path:
        return self.plane.user_kubeconfig(user=name, groups=["system:masters"])

    def audit(self) -> list[Obj]:
        out = []
        with contextlib.suppress(FileNotFoundError):
            for line in self.audit_log.read_text().splitlines():
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        return out


def _ts(text: str) -> float:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- the contenders -------------------------------------------------------------------------


@dataclasses.dataclass
class Proc:
    """A measured operator process."""

    name: str
    pid: int
    stop: Callable[[], None]
    log: Path
    started: float
    ready: float = 0.0
    cpu_at_ready: float = 0.0
    metrics: Callable[[], str] | None = None
    """Its Prometheus text (ours): with ``BENCH_METRICS=1`` a burst writes it, 3 s after
    the last job is done, to ``<scenario>.metrics.txt`` beside the results (the scrape's own
    CPU then counts in ``cpu_seconds``)."""

    def stats(self) -> tuple[float, float, float]:
        """(RSS MB, peak RSS MB, CPU seconds). The CPU counts the children the process has
        waited for (ours makes its serving certificate in a child process)."""
        status = Path(f"/proc/{self.pid}/status").read_text().splitlines()
        kb = {
            line.split(":")[0]: int(line.split()[1])
            for line in status
            if line.startswith(("VmRSS:", "VmHWM:"))
        }
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        cpu = sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")
        return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024, cpu

    def sleeps(self) -> int:
        """How many times the main thread has slept (its voluntary context switches): for our
        operators, the event loop's waits for a socket or a timer, each a wake-up that costs
        CPU however little the loop then runs. Meaningless for the Go operators (the main
        thread is one of many)."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                return int(line.split()[1])
        return 0


async def _wait(pred: Callable[[], Any], what: str, timeout: float, every: float = 0.05) -> None:
    """Until ``pred()`` (a function or a coroutine function) is true."""
    deadline = time.monotonic() + timeout
    while True:
        ok = pred()
        if asyncio.iscoroutine(ok):
            ok = await ok
        if ok:
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(every)


def _ready_http(port: int) -> bool:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return bool(r.status == 200)
    except OSError:
        return False


#: The venv has rich (kfjob's tables), which structlog imports when it can; the image has not.
_NO_RICH = "import sys\n\nsys.modules['rich'] = None  # as if not installed\n"


async def start_ours(
    cluster: Cluster,
    qps: float,
    burst: int,
    *extra: str,
    image_like: bool = False,
    script: str = "training-operator",
) -> Proc:
    """Ours (``script``: the console script, by default the all-in-one); ``image_like``: as the
    image runs it in a pod, without rich (not in the image) and without PyYAML (a pod's
    in-cluster credentials need no YAML; a JSON kubeconfig stands in)."""
    kubeconfig = cluster.user(MEASURED["ours"])
    env_before = os.environ.get("PYTHONPATH")
    if os.environ.get("BENCH_CPUPROF") and not image_like:
        # bench/cpuprof/sitecustomize.py: the CPU-time sampler (see _cpu_profile).
        os.environ["PYTHONPATH"] = str(ROOT / "bench" / "cpuprof")
        os.environ["JOBCONTROLLER_CPUPROF_OUT"] = str(cluster.workdir / "cpuprof.txt")
    if image_like:
        as_json = kubeconfig.with_suffix(".json")
        as_json.write_text(json.dumps(yaml.safe_load(kubeconfig.read_text())))
        kubeconfig = as_json
        shim = cluster.workdir / "image-like"
        shim.mkdir(exist_ok=True)
        (shim / "sitecustomize.py").write_text(_NO_RICH)
        os.environ["PYTHONPATH"] = str(shim)
    op = OperatorProcess(
        script,
        kubeconfig=kubeconfig,
        log=cluster.workdir / "ours.log",
        args=[
            "--leader-elect",
            "--leader-election-namespace=default",
            f"--kube-api-qps={qps:g}",
            f"--kube-api-burst={burst}",
            *extra,
            # e.g. BENCH_OURS_ARGS=--log-format=json: as the Deployment runs it.
            *os.environ.get("BENCH_OURS_ARGS", "").split(),
        ],
    )
    started = time.monotonic()
    try:
        op.start()
    finally:
        os.environ.pop("JOBCONTROLLER_CPUPROF_OUT", None)
        if image_like or os.environ.get("BENCH_CPUPROF"):
            if env_before is None:
                os.environ.pop("PYTHONPATH", None)
            else:
                os.environ["PYTHONPATH"] = env_before
    proc = Proc("ours", op.pid, op.close, op.log, started, metrics=op.metrics)
    await _wait(lambda: _ready_http(op.health_port) or _dead(op), "ours ready", 120)
    assert op.alive, op.tail()
    proc.ready = time.monotonic() - started
    proc.cpu_at_ready = proc.stats()[2]
    return proc


def _dead(op: OperatorProcess) -> bool:
    return not op.alive


def _go_anchor() -> Any:
    sys.path.insert(0, str(ROOT / "hack"))
    import anchor_record

    return anchor_record


async def start_go_training(cluster: Cluster, qps: float, burst: int, workers: int = 4) -> Proc:
    """The Go training-operator as v1.9.4's Deployment runs it (webhook cert rotator satisfied
    by hand, as hack/anchor_record.py does; its webhooks are not called)."""
    anchor = _go_anchor()
    rec = anchor.Recorder(cluster.plane, cluster.workdir, webhooks=False, address=None)
    rec.install_operator_prerequisites()
    probe = free_port()
    log = cluster.workdir / "go.log"
    argv = [
        str(GO_TRAINING),
        f"--kubeconfig={cluster.user(MEASURED['go'])}",
        f"--metrics-bind-address=127.0.0.1:{free_port()}",
        f"--health-probe-bind-address=127.0.0.1:{probe}",
        f"--webhook-server-port={free_port()}",
        f"--kube-api-qps={int(qps)}",
        f"--kube-api-burst={burst}",
        f"--controller-threads={workers}",  # ours: --workers (4 by default)
        # No --leader-elect: outside a pod it wants a namespace no flag gives (v1.9.4's
        # Deployment does not elect either); ours elects, and its Lease renewals are counted.
    ]
    env = dict(os.environ, MY_POD_NAMESPACE=anchor.OPERATOR_NAMESPACE)
    env.pop("KUBECONFIG", None)
    return await _spawn("go", argv, env, log, lambda p: rec._wait_operator_ready(p, probe, log))


async def start_go_mpi(cluster: Cluster, qps: float, burst: int) -> Proc:
    kube = cluster.user(MEASURED["go"])
    log = cluster.workdir / "go.log"
    argv = [
        str(GO_MPI),
        f"--kubeConfig={kube}",
        "--lock-namespace=default",
        f"--kube-api-qps={int(qps)}",
        f"--kube-api-burst={burst}",
        "--threadiness=4",
        f"--monitoring-port={free_port()}",
    ]

    def ready(p: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + 120
        while "Started workers" not in log.read_text(errors="replace"):
            if p.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"mpi-operator not ready:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)

    return await _spawn("go", argv, dict(os.environ), log, ready)


async def _spawn(
    name: str,
    argv: list[str],
    env: dict[str, str],
    log: Path,
    ready: Callable[[subprocess.Popen[bytes]], None],
) -> Proc:
    started = time.monotonic()
    with log.open("ab") as out:
        p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env)

    def stop() -> None:
        p.terminate()
        try:
            p.wait(15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()

    proc = Proc(name, p.pid, stop, log, started)
    try:
        await asyncio.to_thread(ready, p)
    except BaseException:
        stop()
        raise
    proc.ready = time.monotonic() - started
    proc.cpu_at_ready = proc.stats()[2]
    return proc


# -- jobs -----------------------------------------------------------------------------------


def _template(container: str, exit_code: int | None, run_for: str | None) -> Obj:
    return simulate(
        {"spec": {"containers": [{"name": container, "image": "bench:1"}]}},
        exit_code,
        run_for=run_for,
    )


def tfjob(
    name: str, workers: int, *, run_for: str | None = "2s", ps: bool = True, **run_policy: Any
) -> Obj:
    code = 0 if run_for else None
    specs: Obj = {
        "Worker": {"replicas": workers, "template": _template("tensorflow", code, run_for)}
    }
    if ps:
        # The PS runs until the job ends (the default policy stops it).
        specs["PS"] = {"replicas": 1, "template": _template("tensorflow", None, None)}
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"runPolicy": run_policy, "tfReplicaSpecs": specs},
    }


def mpijob(name: str, workers: int) -> Obj:
    return {
        "apiVersion": "kubeflow.org/v2beta1",
        "kind": "MPIJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "slotsPerWorker": 1,
            "mpiReplicaSpecs": {
                "Launcher": {"replicas": 1, "template": _template("mpi", 0, "2s")},
                "Worker": {"replicas": workers, "template": _template("mpi", None, None)},
            },
        },
    }


def _done(job: Obj) -> bool:
    conds = (job.get("status") or {}).get("conditions") or []
    return any(c["type"] in ("Succeeded", "Failed") and c["status"] == "True" for c in conds)


def rendered(jobs: list[Obj]) -> list[list[Obj]]:
    """Per job, what the operator would create, owner references removed (no owner exists)."""
    from kfjob.render import render_job

    out = []
    for job in jobs:
        r = render_job(job, namespace=NS, redact=False)
        objs = []
        for obj in r.objects:
            obj = copy.deepcopy(obj)
            obj.setdefault("metadata", {}).pop("ownerReferences", None)
            objs.append(obj)
        out.append(objs)
    return out


BY_KIND = {
    "Pod": PODS,
    "Service": SERVICES,
    "ConfigMap": CONFIGMAPS,
    "Secret": SECRETS,
    "Job": JOBS,
}


def _resource_of(obj: Obj) -> Resource:
    return BY_KIND[obj["kind"]]


async def bare_create(kube: KubeApi, per_job: list[list[Obj]]) -> None:
    """Each job's objects in the operator's order, all jobs at once, through one rate limit."""

    async def one(objs: list[Obj]) -> None:
        for obj in objs:
            await kube.create(_resource_of(obj), obj, namespace=NS)

    await asyncio.gather(*(one(objs) for objs in per_job))


@contextlib.asynccontextmanager
async def driver(cluster: Cluster, crds: list[Path]) -> AsyncIterator[KubeApi]:
    async with await KubeApi.from_config(
        kubeconfig=str(cluster.user(DRIVER)), qps=2000, burst=4000
    ) as kube:
        await install_crds(kube, crds)
        await kube.create(NAMESPACES, {"metadata": {"name": NS}})
        # The operators' own namespace, as deployed (ours keeps its training-progress
        # certificate's Secret there; the Go operator's prerequisites apply it again).
        await kube.create(NAMESPACES, {"metadata": {"name": OPERATOR_NAMESPACE}})
        yield kube


OUR_CRDS = sorted((ROOT / "manifests" / "base" / "crds").glob("*.yaml"))


def go_crds() -> list[Path]:
    return sorted((_go_anchor().SRC / "manifests" / "base" / "crds").glob("kubeflow.org_*.yaml"))


async def count(kube: KubeApi, res: Resource) -> int:
    """Objects of ``res`` in the namespace, without listing them (a one-item page)."""
    page = await kube.request("GET", res.path(namespace=NS), query={"limit": 1})
    items = len(page.get("items") or [])
    return items + int((page.get("metadata") or {}).get("remainingItemCount") or 0)


async def _at_least(kube: KubeApi, res: Resource, n: int) -> bool:
    return await count(kube, res) >= n


async def wait_done(kube: KubeApi, res: Resource, n: int, timeout: float) -> float:
    start = time.monotonic()

    async def all_done() -> bool:
        items, _ = await kube.list(res, namespace=NS)
        return len(items) == n and all(_done(j) for j in items)

    await _wait(all_done, f"{n} {res.plural} done", timeout, every=0.5)
    return time.monotonic() - start


async def events_settled(kube: KubeApi, quiet: float = 5.0, timeout: float = 120.0) -> list[Obj]:
    """The namespace's Events once their total count has not moved for ``quiet`` seconds."""
    last, since, deadline = -1, time.monotonic(), time.monotonic() + timeout
    while True:
        items, _ = await kube.list(EVENTS, namespace=NS)
        total = sum(int(e.get("count") or 1) for e in items)
        if total != last:
            last, since = total, time.monotonic()
        elif time.monotonic() - since >= quiet or time.monotonic() > deadline:
            return items
        await asyncio.sleep(1)


# -- measurements ---------------------------------------------------------------------------


def requests_by(audit: list[Obj], user: str) -> Counter[str]:
    out: Counter[str] = Counter()
    for e in audit:
        if e.get("user", {}).get("username") != user or e.get("stage") != "ResponseComplete":
            continue
        ref = e.get("objectRef") or {}
        res = ref.get("resource", "?") + (
            f"/{ref['subresource']}" if ref.get("subresource") else ""
        )
        out[f"{e['verb']} {res}"] += 1
    return out


OWNED = frozenset({"pods", "services", "configmaps", "secrets", "jobs"})


def creates(audit: list[Obj], resources: frozenset[str] = OWNED) -> list[tuple[float, str]]:
    """(when, resource) of each successful create of ``resources`` in the bench namespace by
    any client but the driver (MPI launcher pods come from the controller-manager), sorted."""
    out = []
    for e in audit:
        ref = e.get("objectRef") or {}
        if (
            e.get("verb") == "create"
            and ref.get("resource") in resources
            and not ref.get("subresource")
            and ref.get("namespace") == NS
            and e.get("stage") == "ResponseComplete"
            and (e.get("responseStatus") or {}).get("code") == 201
            and e.get("user", {}).get("username") != DRIVER
        ):
            out.append((_ts(e["stageTimestamp"]), ref["resource"]))
    return sorted(out)


def first_create(audit: list[Obj], user: str) -> float:
    return min(
        _ts(e["requestReceivedTimestamp"])
        for e in audit
        if e.get("user", {}).get("username") == user
        and e.get("verb") == "create"
        and (e.get("objectRef") or {}).get("namespace") == NS
        and (e.get("objectRef") or {}).get("resource") != "namespaces"
        and "dryRun=" not in e.get("requestURI", "")  # settle_first_write's
    )


def events_summary(items: list[Obj], log: Path | None, kind: str, jobs: int) -> Obj:
    by_reason: Counter[str] = Counter()
    ended: set[str] = set()
    for e in items:
        by_reason[e.get("reason", "")] += int(e.get("count") or 1)
        obj = e.get("involvedObject") or {}
        if obj.get("kind") == kind and str(e.get("reason", "")).endswith(("Succeeded", "Failed")):
            ended.add(obj.get("name", ""))
    lost = 0
    if log is not None and log.exists():
        for line in log.read_text(errors="replace").splitlines():
            if "event buffer full" in line:
                # One line per period, with the drops since the last (dropped=N).
                counted = re.search(r'"?dropped"?[=:] ?(\d+)', line)
                lost += int(counted.group(1)) if counted else 1
            elif "failed to write event" in line:
                lost += 1
    return {
        "stored": sum(by_reason.values()),
        "objects": len(items),
        "by_reason": dict(by_reason.most_common()),
        "jobs_with_end_event": len(ended),
        "jobs": jobs,
        "lost_by_log": lost if log is not None else None,
    }


@dataclasses.dataclass
class Outcome:
    """What one contender did in one scenario."""

    contender: str
    jobs: int
    seconds_to_all_pods: float | None = None
    seconds_to_all_objects: float | None = None
    """Pods, Services (and for MPI the ConfigMap, Secret and launcher Job): what the bare
    client's time is the floor of, whatever order each creates them in."""
    objects: int = 0
    seconds_to_all_done: float | None = None
    pods: int = 0
    cpu_seconds: float | None = None
    peak_rss_mb: float | None = None
    rss_mb: float | None = None
    ready_seconds: float | None = None
    requests: dict[str, int] = dataclasses.field(default_factory=dict)
    events: Obj | None = None
    extra: Obj = dataclasses.field(default_factory=dict)
    pod_timeline: list[float] = dataclasses.field(default_factory=list)

    @property
    def requests_per_job(self) -> float:
        return sum(self.requests.values()) / max(self.jobs, 1)


def _finish(out: Outcome, cluster: Cluster, user: str, t0: float | None) -> None:
    audit = cluster.audit()
    out.requests = dict(requests_by(audit, user).most_common())
    made = creates(audit)
    start = t0 if t0 is not None else first_create(audit, DRIVER)
    pods = [t for t, res in made if res == "pods"]
    out.pods = len(pods)
    out.pod_timeline = [round(t - start, 3) for t in pods]
    if pods:
        out.seconds_to_all_pods = round(pods[-1] - start, 2)
    if made:
        out.seconds_to_all_objects = round(made[-1][0] - start, 2)
        out.objects = len(made)


async def _wait_audit(cluster: Cluster) -> None:
    await asyncio.sleep(2.5)  # the audit backend's batch wait is 1 s


# -- scenarios ------------------------------------------------------------------------------


async def burst_operator(
    who: str, jobs: list[Obj], res: Resource, qps: float, burst: int, base: Path, workers: int
) -> Outcome:
    go = who == "go"
    # Against mpi-operator, which serves MPIJob alone, ours is our MPI-only operator too;
    # ``ours-all`` is the all-in-one serving all six kinds (its watches of the others count).
    script = "mpi-operator" if who == "ours" and res is MPIJOBS else "training-operator"
    with Cluster(base / who) as cluster:
        crds = go_crds() if go and res is TFJOBS else OUR_CRDS
        async with driver(cluster, crds) as kube:
            first_write = await settle_first_write(kube, res, jobs[0])
            await warm_apiserver(kube, crds)
            if not go:
                proc = await start_ours(cluster, qps, burst, f"--workers={workers}", script=script)
            elif res is TFJOBS:
                proc = await start_go_training(cluster, qps, burst, workers)
            else:
                proc = await start_go_mpi(cluster, qps, burst)
            profiler = None if go else _profile(proc, base)
            sampled = None if go else await _cpu_profile(proc, cluster)
            try:
                out = Outcome(who, len(jobs), ready_seconds=round(proc.ready, 2))
                out.extra["api_first_write_seconds"] = first_write
                cpu_submit, sleeps_submit = proc.stats()[2], proc.sleeps()
                await asyncio.gather(*(kube.create(res, j, namespace=NS) for j in jobs))
                out.seconds_to_all_done = round(await wait_done(kube, res, len(jobs), 900), 2)
                await asyncio.sleep(3)
                cpu_done = proc.stats()[2]
                if not go:
                    out.extra["loop_sleeps_submit_to_done_3s"] = proc.sleeps() - sleeps_submit
                if sampled is not None:
                    done = await _cpu_profile(proc, cluster)
                    assert done is not None
                    (RESULTS / f"{base.name}.cpuprof.txt").write_text(
                        "".join(f"{k} {n}\n" for k, n in (done - sampled).most_common())
                    )
                if proc.metrics is not None and os.environ.get("BENCH_METRICS"):
                    (RESULTS / f"{base.name}.metrics.txt").write_text(proc.metrics())
                items = await events_settled(kube)
                _, peak, cpu = proc.stats()
                out.cpu_seconds = round(cpu - proc.cpu_at_ready, 2)
                # The window of the side-by-side run: from the first submission until
                # 3 s after the last job is done (``cpu_seconds`` runs on to the Events' end).
                out.extra["cpu_submit_to_done_3s"] = round(cpu_done - cpu_submit, 2)
                out.extra["cpu_ready_to_submit"] = round(cpu_submit - proc.cpu_at_ready, 2)
                out.peak_rss_mb = round(peak, 1)
                out.events = events_summary(items, None if go else proc.log, res.kind, len(jobs))
            finally:
                if profiler is not None:
                    profiler.send_signal(signal.SIGINT)
                    profiler.wait(30)
                proc.stop()
            await _wait_audit(cluster)
            _finish(out, cluster, MEASURED["go" if go else "ours"], None)
            # Done is measured from the end of the submission; report it from the first create.
            return out


def _profile(proc: Proc, base: Path) -> subprocess.Popen[bytes] | None:
    """With ``BENCH_PYSPY=/path/to/py-spy``: our process sampled from submission to the end,
    written as collapsed stacks (``<scenario>.pyspy.txt``) beside the scenario's results;
    ``BENCH_PYSPY_ARGS`` adds py-spy options (``--native``: the event loop's C frames too)."""
    spy = os.environ.get("BENCH_PYSPY")
    if not spy:
        return None
    out = RESULTS / f"{base.name}.pyspy.txt"
    argv = [spy, "record", "-p", str(proc.pid), "-r", "250", "-f", "raw", "-o", str(out)]
    argv += os.environ.get("BENCH_PYSPY_ARGS", "").split()
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _cpu_profile(proc: Proc, cluster: Cluster) -> Counter[str] | None:
    """With ``BENCH_CPUPROF=1``: the CPU-time sampler's counts so far (bench/cpuprof), asked
    for with SIGUSR2. The burst keeps those from submission to 3 s after the last job is done
    as ``<scenario>.cpuprof.txt`` (collapsed stacks, each count 4 ms of the operator's CPU)."""
    if not os.environ.get("BENCH_CPUPROF"):
        return None
    path = cluster.workdir / "cpuprof.txt"
    before = path.stat().st_mtime_ns if path.exists() else None
    os.kill(proc.pid, signal.SIGUSR2)
    await _wait(
        lambda: path.exists() and path.stat().st_mtime_ns != before, "the sampler's counts", 10
    )
    counts: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, n = line.rpartition(" ")
        counts[stack] = int(n)
    return counts


async def burst_bare(jobs: list[Obj], qps: float, burst: int, base: Path) -> Outcome:
    per_job = rendered(jobs)
    with Cluster(base / "bare") as cluster:
        async with driver(cluster, OUR_CRDS) as kube:
            async with await KubeApi.from_config(
                kubeconfig=str(cluster.user(MEASURED["bare"])), qps=qps, burst=burst
            ) as bare:
                out = Outcome("bare", len(jobs))
                cpu0 = resource.getrusage(resource.RUSAGE_SELF)
                await bare_create(bare, per_job)
                cpu1 = resource.getrusage(resource.RUSAGE_SELF)
                out.cpu_seconds = round(
                    cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2
                )
                # An MPI launcher's pod comes from the controller-manager's Job controller,
                # for the bare client as for the operators: its time counts too.
                pods = sum(1 for objs in per_job for o in objs if o["kind"] in ("Pod", "Job"))
                await _wait(lambda: _at_least(kube, PODS, pods), f"{pods} pods", 300, every=0.5)
            await _wait_audit(cluster)
            audit = cluster.audit()
            _finish(out, cluster, MEASURED["bare"], first_create(audit, MEASURED["bare"]))
            return out


def contenders(kind: str) -> list[str]:
    who = ["ours", "ours-all"] if kind == "MPIJob" else ["ours"]
    who += [] if os.environ.get("BENCH_BARE", "1") == "0" else ["bare"]
    if os.environ.get("BENCH_GO", "1") == "0":
        return who
    binary = GO_TRAINING if kind == "TFJob" else GO_MPI
    return [*who, "go"] if binary.exists() else who


async def scenario_burst(
    name: str,
    res: Resource,
    jobs: list[Obj],
    qps: float,
    burst: int,
    base: Path,
    workers: int = 4,
) -> list[Outcome]:
    out = []
    for who in contenders(res.kind):
        print(f"  {name}: {who} ...", flush=True)
        if who == "bare":
            out.append(await burst_bare(jobs, qps, burst, base))
        else:
            out.append(await burst_operator(who, jobs, res, qps, burst, base, workers))
    return out


#: A dry-run create answered sooner than this is the API server's usual pace.
_FIRST_WRITE_SETTLED = 0.25


async def settle_first_write(kube: KubeApi, res: Resource, job: Obj) -> float:
    """Dry-run creates of ``job`` until one is answered at once; returns the first one's time.

    A fresh API server answers the first create of a custom resource only after about 2 s
    (2.03-2.07 s in five fresh clusters here, whether it is a dry run or not; later ones take
    4 ms). Whether a burst met that pause depended on how the operator's start lined up with
    the driver's first create: the job creates of a "bad" run each waited 2.0-2.15 s in the
    API server, before any operator could see one, which was the bimodal "all objects vs a
    bare client" row (3.7 or 5.6 s with 16 workers, whatever the code). An operator on a
    running cluster never meets it, and the bare client, which creates no custom resource,
    never did. Each contender's cluster is settled so before the contender starts."""
    first: float | None = None
    deadline = time.monotonic() + 60
    while True:
        began = time.monotonic()
        await kube.request("POST", res.path(namespace=NS), body=job, query={"dryRun": "All"})
        took = time.monotonic() - began
        first = took if first is None else first
        if took < _FIRST_WRITE_SETTLED or time.monotonic() > deadline:
            return round(first, 3)


async def warm_apiserver(kube: KubeApi, crds: list[Path]) -> None:
    """One LIST of every resource either operator reads, from the watch cache (resourceVersion
    "0"), which answers once the cache is ready. A fresh API server starts each resource's
    cache at its first request (1.3 s for all of them here) and meanwhile answers a watch that
    streams its initial state with 429 "storage is (re)initializing": an operator started on a
    running cluster meets neither. Unwarmed, the first operator started paid about 0.25 s of
    it inside "start to ready", and ours a LIST more per kind (its fallback)."""
    core: list[Resource] = [PODS, SERVICES, CONFIGMAPS, SECRETS, EVENTS, NODES, LEASES, JOBS, HPAS]
    for path in crds:
        for doc in yaml.safe_load_all(path.read_text()):
            spec = (doc or {}).get("spec") or {}
            served = [v["name"] for v in spec.get("versions", []) if v.get("served")]
            names = spec.get("names") or {}
            core += [Resource(spec["group"], v, names["kind"], names["plural"]) for v in served]
    await asyncio.gather(*(_cache_ready(kube, r) for r in core))


async def _cache_ready(kube: KubeApi, res: Resource) -> None:
    """A LIST from the watch cache (resourceVersion "0", no limit: with one, or a selector, a
    cache not ready yet passes the LIST to etcd), which a starting cache answers with 429
    "storage is (re)initializing" until it is ready."""
    deadline = time.monotonic() + 60
    while True:
        try:
            await kube.list(res, resource_version="0")
            return
        except ApiError as exc:
            if exc.status != 429 or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


async def scenario_idle(base: Path, idle: float = 10.0) -> list[Outcome]:
    """Each contender started on a fresh, warmed cluster (:func:`warm_apiserver`) where its
    namespace exists (:func:`driver`): ours makes its training-progress certificate on this
    first start, in a child process whose CPU is counted."""
    out = []
    whom = [w for w in contenders("TFJob") if w != "bare"]
    for who in [*whom[:1], "ours-image", *whom[1:]]:
        print(f"  idle: {who} ...", flush=True)
        with Cluster(base / who, scheduler=False) as cluster:
            async with driver(cluster, go_crds() if who == "go" else OUR_CRDS) as kube:
                await warm_apiserver(kube, go_crds() if who == "go" else OUR_CRDS)
                if who == "go":
                    proc = await start_go_training(cluster, 20, 30)
                else:
                    proc = await start_ours(cluster, 20, 30, image_like=who == "ours-image")
                try:
                    cpu_ready = proc.cpu_at_ready
                    await asyncio.sleep(idle)
                    rss, peak, cpu = proc.stats()
                finally:
                    proc.stop()
        out.append(
            Outcome(
                who,
                0,
                rss_mb=round(rss, 1),
                peak_rss_mb=round(peak, 1),
                ready_seconds=round(proc.ready, 2),
                cpu_seconds=round(cpu_ready, 2),
                extra={"idle_cpu_seconds": round(cpu - cpu_ready, 3), "idle_for": idle},
            )
        )
    return out


async def scenario_scale(base: Path, jobs: int = 2000, workers: int = 4) -> list[Outcome]:
    """RSS with every pod and service of ``jobs`` TFJobs in the caches (pods stay Pending)."""
    out = []
    for who in contenders("TFJob"):
        if who != "bare":
            print(f"  scale: {who} ...", flush=True)
            out.append(await _scale(who, base, jobs, workers))
    return out


async def _scale(who: str, base: Path, jobs: int, workers: int) -> Outcome:
    want = jobs * (workers + 1)
    with Cluster(base / who, scheduler=False) as cluster:
        async with driver(cluster, go_crds() if who == "go" else OUR_CRDS) as kube:
            await settle_first_write(kube, TFJOBS, tfjob("settle", workers))
            await warm_apiserver(kube, go_crds() if who == "go" else OUR_CRDS)
            start = start_ours if who == "ours" else start_go_training
            proc = await start(cluster, 500, 1000)
            try:
                t0 = time.monotonic()
                sem = asyncio.Semaphore(64)

                async def submit(body: Obj) -> None:
                    async with sem:
                        await kube.create(TFJOBS, body, namespace=NS)

                await asyncio.gather(*(submit(tfjob(f"s{i:04d}", workers)) for i in range(jobs)))

                async def all_there() -> bool:
                    pods = await count(kube, PODS)
                    return pods >= want and await count(kube, SERVICES) >= want

                await _wait(all_there, f"{want} pods and services", 1500, every=2)
                took = time.monotonic() - t0
                await asyncio.sleep(15)
                rss, peak, cpu = proc.stats()
            finally:
                proc.stop()
    return Outcome(
        who,
        jobs,
        seconds_to_all_pods=round(took, 1),
        pods=want,
        rss_mb=round(rss, 1),
        peak_rss_mb=round(peak, 1),
        cpu_seconds=round(cpu - proc.cpu_at_ready, 1),
    )


async def scenario_timers(
    base: Path, n: int = 10, deadline: int = 5, ttl: int = 3
) -> list[Outcome]:
    """Delay between when a deadline or TTL falls due (from the job's status timestamps, which
    have one-second precision) and when a watch sees it acted on."""
    out = []
    for who in contenders("TFJob"):
        if who == "bare":
            continue
        print(f"  timers: {who} ...", flush=True)
        with Cluster(base / who) as cluster:
            async with driver(cluster, go_crds() if who == "go" else OUR_CRDS) as kube:
                start = start_ours if who == "ours" else start_go_training
                proc = await start(cluster, 20, 30)
                try:
                    seen: dict[str, Obj] = {}
                    watcher = asyncio.create_task(_watch_jobs(kube, seen))
                    await asyncio.sleep(0.5)
                    bodies = [
                        tfjob(f"deadline-{i}", 1, run_for=None, activeDeadlineSeconds=deadline)
                        for i in range(n)
                    ] + [tfjob(f"ttl-{i}", 1, ttlSecondsAfterFinished=ttl) for i in range(n)]
                    await asyncio.gather(*(kube.create(TFJOBS, b, namespace=NS) for b in bodies))
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(_timers_done(seen, n), 60)
                    watcher.cancel()
                finally:
                    proc.stop()
        dl = [
            s["failed_at"] - (_ts(s["start"]) + deadline)
            for k, s in seen.items()
            if k.startswith("deadline") and "failed_at" in s and "start" in s
        ]
        tl = [
            s["deleted_at"] - (_ts(s["completion"]) + ttl)
            for k, s in seen.items()
            if k.startswith("ttl") and "deleted_at" in s and "completion" in s
        ]
        out.append(
            Outcome(
                who,
                2 * n,
                extra={
                    "deadline_fired": f"{len(dl)}/{n}",
                    "deadline_delay_median": _median(dl),
                    "deadline_delay_max": round(max(dl), 2) if dl else None,
                    "ttl_fired": f"{len(tl)}/{n}",
                    "ttl_delay_median": _median(tl),
                    "ttl_delay_max": round(max(tl), 2) if tl else None,
                    "deadline_delays": [round(d, 3) for d in dl],
                    "ttl_delays": [round(d, 3) for d in tl],
                },
            )
        )
    return out


def _median(xs: list[float]) -> float | None:
    return round(statistics.median(xs), 2) if xs else None


async def _watch_jobs(kube: KubeApi, seen: dict[str, Obj]) -> None:
    _, rv = await kube.list(TFJOBS, namespace=NS)
    while True:
        async for ev in kube.watch(
            TFJOBS, namespace=NS, resource_version=rv, timeout_seconds=300, inactivity_timeout=600
        ):
            obj = ev.get("object") or {}
            meta = obj.get("metadata") or {}
            rv = meta.get("resourceVersion", rv)
            s = seen.setdefault(meta.get("name", ""), {})
            status = obj.get("status") or {}
            if status.get("startTime"):
                s.setdefault("start", status["startTime"])
            if status.get("completionTime"):
                s.setdefault("completion", status["completionTime"])
            conds = status.get("conditions") or []
            if any(c["type"] == "Failed" and c["status"] == "True" for c in conds):
                s.setdefault("failed_at", time.time())
            if ev.get("type") == "DELETED" or meta.get("deletionTimestamp"):
                s.setdefault("deleted_at", time.time())


async def _timers_done(seen: dict[str, Obj], n: int) -> None:
    while True:
        fired = sum(1 for k, s in seen.items() if k.startswith("deadline") and "failed_at" in s)
        gone = sum(1 for k, s in seen.items() if k.startswith("ttl") and "deleted_at" in s)
        if fired == n and gone == n:
            return
        await asyncio.sleep(0.2)


# -- output ---------------------------------------------------------------------------------


def _plot(name: str, outcomes: list[Outcome]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if any(o.pod_timeline for o in outcomes):
        for o in outcomes:
            if o.pod_timeline:
                ax.step(
                    o.pod_timeline,
                    range(1, len(o.pod_timeline) + 1),
                    where="post",
                    label=o.contender,
                )
        ax.set_xlabel("seconds since the first create")
        ax.set_ylabel("pods created")
    elif name == "timers":
        for i, o in enumerate(outcomes):
            for j, key in enumerate(("deadline_delays", "ttl_delays")):
                ys = o.extra.get(key) or []
                ax.scatter([i * 3 + j] * len(ys), ys, label=f"{o.contender} {key[:-7]}")
        ax.set_ylabel("seconds after due")
        ax.set_xticks([])
    else:
        xs = [o.contender for o in outcomes]
        ax.bar(xs, [o.rss_mb or 0 for o in outcomes])
        ax.set_ylabel("RSS (MB)")
    ax.set_title(name)
    if name != "idle" and name != "scale":
        ax.legend()
    fig.tight_layout()
    fig.savefig(RESULTS / f"{name}.png", dpi=90)
    plt.close(fig)


def write(name: str, outcomes: list[Outcome], setup: Obj) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    doc = {
        "scenario": name,
        "setup": setup,
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
        "outcomes": [
            dataclasses.asdict(o) | {"requests_per_job": round(o.requests_per_job, 2)}
            for o in outcomes
        ],
    }
    (RESULTS / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    _plot(name, outcomes)


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a is not None and b else "-"


def summary() -> str:
    """The README's table, from whatever JSON results exist."""

    def load(name: str) -> dict[str, Obj]:
        path = RESULTS / f"{name}.json"
        if not path.exists():
            return {}
        return {o["contender"]: o for o in json.loads(path.read_text())["outcomes"]}

    rows = []

    def row(what: str, ours: Any, go: Any, bare: Any = None, unit: str = "") -> None:
        def fmt(v: Any) -> str:
            return "-" if v is None else f"{v}{unit}"

        ratio = (
            _ratio(ours, go)
            if isinstance(ours, (int, float)) and isinstance(go, (int, float))
            else "-"
        )
        rows.append(f"| {what} | {fmt(ours)} | {fmt(go)} | {ratio} | {fmt(bare)} |")

    def burst(title: str, r: dict[str, Obj], *, pods: str, objects: str, tf: bool) -> None:
        """The rows a burst scenario shares (TFJobs and MPIJobs), then its own."""
        o, g, b = r.get("ours", {}), r.get("go", {}), r.get("bare", {})

        def each(key: str) -> tuple[Any, Any, Any]:
            return o.get(key), g.get(key), b.get(key)

        row(f"{title}: {pods} (s)", *each("seconds_to_all_pods"))
        row(f"  ... {objects} (s)", *each("seconds_to_all_objects"))
        row("  ... that as a multiple of the bare client", _mult(o, b), _mult(g, b))
        row("  ... all Succeeded (s)", o.get("seconds_to_all_done"), g.get("seconds_to_all_done"))
        row("  ... CPU per job (ms)", _per_job_ms(o), _per_job_ms(g), _per_job_ms(b))
        if "cpu_submit_to_done_3s" in o.get("extra", {}):
            row(
                "  ... of it from submission to 3 s after done (ms)",
                _per_job_ms(o, "cpu_submit_to_done_3s"),
                _per_job_ms(g, "cpu_submit_to_done_3s"),
            )
        if tf:
            row("  ... peak RSS (MB)", o.get("peak_rss_mb"), g.get("peak_rss_mb"))
        row("  ... API requests per job", *each("requests_per_job"))
        if tf:
            row("  ... Events lost / jobs without their end Event", _lost(o), _lost(g))
        else:
            row("  ... of them Events", _event_requests(o), _event_requests(g))

    for scenario in ("tfjobs-qps20", "tfjobs-qps200", "tfjobs-qps200-w16"):
        qps = 20 if scenario == "tfjobs-qps20" else 200
        workers = 16 if scenario.endswith("-w16") else 4
        if r := load(scenario):
            title = f"100 TFJobs, QPS {qps}, {workers} workers"
            burst(title, r, pods="all 400 pods", objects="all 800 pods and services", tf=True)
    if r := load("tfjobs-life"):
        title = "100 TFJobs of 4 workers running 10 s, QPS 20"
        burst(title, r, pods="all 400 pods", objects="all 800 pods and services", tf=True)
    if r := load("mpijobs"):
        burst("50 MPIJobs, QPS 20", r, pods="all pods", objects="all their objects", tf=False)
        if a := r.get("ours-all"):
            # Ours above is our mpi-operator (MPIJob alone, as Go's); this is the all-in-one.
            g = r.get("go", {})
            title = "  ... ours as training-operator, all six kinds"
            row(f"{title}: CPU per job (ms)", _per_job_ms(a), _per_job_ms(g))
            row(
                "  ... its API requests per job",
                a.get("requests_per_job"),
                g.get("requests_per_job"),
            )
    r = load("idle")
    if r:
        o, g = r.get("ours", {}), r.get("go", {})
        row("idle RSS, all six kinds (MB)", o.get("rss_mb"), g.get("rss_mb"))
        oi = r.get("ours-image", {})
        row("  ... as the image runs it in a pod (MB)", oi.get("rss_mb"), g.get("rss_mb"))
        row("start to ready (s)", o.get("ready_seconds"), g.get("ready_seconds"))
        row("  ... as the image runs it (s)", oi.get("ready_seconds"), g.get("ready_seconds"))
    r = load("scale")
    if r:
        o, g = r.get("ours", {}), r.get("go", {})
        row("RSS, 2,000 TFJobs / 10k pods / 10k services (MB)", o.get("rss_mb"), g.get("rss_mb"))
        row(
            "  ... time to all of them at QPS 500 (s)",
            o.get("seconds_to_all_pods"),
            g.get("seconds_to_all_pods"),
        )
    if r := load("scale-50k"):
        o, g = r.get("ours", {}), r.get("go", {})
        oe, ge = o.get("extra", {}), g.get("extra", {})
        n = int(o.get("jobs") or g.get("jobs") or 0)
        title = f"{n:,} PyTorchJobs, {5 * n:,} pods Running"
        row(f"{title}: peak RSS (MB)", *_both(o, g, "peak_rss_mb"))
        row("  ... RSS above idle per cached object (KB)", *_both(oe, ge, "kb_per_object"))
        row("  ... time to all pods created (s)", *_both(o, g, "seconds_to_all_pods"))
        row("  ... time to all jobs Running (s)", *_both(o, g, "seconds_to_all_done"))
        row("  ... creation to Running, p50 (s)", *_both(oe, ge, "latency_p50"))
        row("  ... creation to Running, p99 (s)", *_both(oe, ge, "latency_p99"))
        row("  ... CPU (s)", *_both(o, g, "cpu_seconds"))
    r = load("timers")
    if r:
        o, g = r.get("ours", {}).get("extra", {}), r.get("go", {}).get("extra", {})
        row(
            "activeDeadlineSeconds: fired, median delay after due (s)",
            _fired(o, "deadline"),
            _fired(g, "deadline"),
        )
        row(
            "ttlSecondsAfterFinished: fired, median delay after due (s)",
            _fired(o, "ttl"),
            _fired(g, "ttl"),
        )
    head = "| | ours | Go | ours/Go | bare client |\n|---|---|---|---|---|"
    return head + "\n" + "\n".join(rows) + "\n"


def _both(o: Obj, g: Obj, key: str) -> tuple[Any, Any]:
    return o.get(key), g.get(key)


def _mult(o: Obj, b: Obj) -> float | None:
    a, c = o.get("seconds_to_all_objects"), b.get("seconds_to_all_objects")
    return round(a / c, 2) if a and c else None


def _per_job_ms(o: Obj, window: str = "") -> float | None:
    cpu = o.get("extra", {}).get(window) if window else o.get("cpu_seconds")
    jobs = o.get("jobs")
    return round(1000 * cpu / jobs, 1) if cpu is not None and jobs else None


def _lost(o: Obj) -> str | None:
    ev = o.get("events")
    if not ev:
        return None
    lost = ev.get("lost_by_log")
    return f"{'?' if lost is None else lost} / {ev['jobs'] - ev['jobs_with_end_event']}"


def _event_requests(o: Obj) -> float | None:
    reqs, jobs = o.get("requests") or {}, o.get("jobs")
    if not jobs:
        return None
    return round(sum(v for k, v in reqs.items() if k.split()[-1] == "events") / jobs, 2)


def _fired(e: Obj, what: str) -> str | None:
    if not e:
        return None
    return f"{e.get(f'{what}_fired')}, {e.get(f'{what}_delay_median')}"


SCENARIOS = (
    "idle",
    "tfjobs-qps20",
    "tfjobs-qps200",
    "tfjobs-qps200-w16",
    "tfjobs-life",
    "mpijobs",
    "timers",
    "scale",
)


async def run(name: str, base: Path) -> None:
    print(f"{name}:", flush=True)
    if name.startswith("tfjobs-qps"):
        # -w16: 16 workers (Go: --controller-threads=16); at QPS 200 the default 4, each
        # waiting on the API server's answers, keep both operators below the QPS limit.
        rate, _, w = name.removeprefix("tfjobs-qps").partition("-w")
        qps, workers = int(rate), int(w or 4)
        burst = 30 if qps == 20 else 300
        jobs = [tfjob(f"tf-{i:03d}", 3) for i in range(100)]
        outcomes = await scenario_burst(name, TFJOBS, jobs, qps, burst, base / name, workers)
        setup = {"jobs": 100, "pods_per_job": 4, "qps": qps, "burst": burst, "workers": workers}
    elif name == "tfjobs-life":
        # The side-by-side run: 4 workers (no PS) whose pods run 10 s, so that jobs
        # spend most of their life Running rather than being created.
        jobs = [tfjob(f"tf-{i:03d}", 4, run_for="10s", ps=False) for i in range(100)]
        outcomes = await scenario_burst(name, TFJOBS, jobs, 20, 30, base / name)
        setup = {"jobs": 100, "pods_per_job": 4, "qps": 20, "burst": 30, "pod_runs_for": "10s"}
    elif name == "mpijobs":
        jobs = [mpijob(f"mpi-{i:02d}", 2) for i in range(50)]
        outcomes = await scenario_burst(name, MPIJOBS, jobs, 20, 30, base / name)
        setup = {"jobs": 50, "workers": 2, "qps": 20, "burst": 30}
    elif name == "idle":
        outcomes = await scenario_idle(base / name)
        setup = {"idle_seconds": 10}
    elif name == "scale":
        outcomes = await scenario_scale(base / name)
        setup = {"jobs": 2000, "pods_per_job": 5, "qps": 500, "burst": 1000}
    elif name == "scale-50k":
        import scale50k  # opt-in: not in SCENARIOS (a full run takes most of an hour)

        jobs = scale50k.jobs_wanted()
        outcomes = await scale50k.scenario(base / name, jobs)
        setup = scale50k.setup(jobs)
    elif name == "timers":
        outcomes = await scenario_timers(base / name)
        setup = {"jobs": 20, "activeDeadlineSeconds": 5, "ttlSecondsAfterFinished": 3}
    else:
        known = ", ".join((*SCENARIOS, "scale-50k"))
        raise SystemExit(f"unknown scenario {name!r}; one of {known}")
    write(name, outcomes, setup)
    for o in outcomes:
        shown = {
            k: v for k, v in dataclasses.asdict(o).items() if k not in ("pod_timeline", "requests")
        }
        shown["extra"] = {
            k: v for k, v in o.extra.items() if k not in ("rss_samples", "job_timeline")
        }
        print(f"  {json.dumps(shown)}", flush=True)


def main(argv: list[str]) -> int:
    names = argv or list(SCENARIOS)
    missing = [p.name for p in (GO_TRAINING, GO_MPI) if not p.exists()]
    if missing and os.environ.get("BENCH_GO", "1") != "0":
        # A machine that never built them (the anchors' cache is empty): say so up front, the
        # scenarios run with ours and the bare client.
        print(
            f"the Go operators are not built ({', '.join(missing)} missing under {ANCHORS}): "
            "their columns stay empty; the module docstring says how to build them",
            flush=True,
        )
    # Our operators read compiled bytecode, as the image's do (it compiles at build time): a
    # shell with PYTHONDONTWRITEBYTECODE=1 would otherwise have them compile every module at
    # each start, which was most of "start to ready" (bench/bench_startup.py).
    from bench_startup import bytecode_env

    os.environ.update(bytecode_env())
    with tempfile.TemporaryDirectory(prefix="jobcontroller-bench-") as tmp:
        failed = []
        for name in names:
            try:
                asyncio.run(run(name, Path(tmp)))
            except Exception as exc:  # one broken scenario must not lose the others' results
                print(f"{name} FAILED: {exc!r}", flush=True)
                failed.append(name)
    table = summary()
    (RESULTS / "summary.md").write_text(table)
    print(table)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
