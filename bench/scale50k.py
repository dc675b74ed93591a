"""``scale-50k``: 10,000 PyTorchJobs of 5 pods (50,000 pods Running on kwok) against one operator.

Opt-in and long (``make bench BENCH=scale-50k``; ``BENCH_SCALE_JOBS=500`` for a small run;
``BENCH_SCALE_CONTENDERS=go`` or ``ours`` to measure one, keeping the other's figures of the
same size from the results file; ``BENCH_SCALE_RESTART=1`` starts ours again once every pod
runs, to measure a full relist).
Per contender (ours, the Go training-operator v1.9.4), on a fresh cluster of its own:

- The kind: PyTorchJob, 1 Master + 4 Workers, the kind both operators serve and the one most
  used at scale. In v1.9.4 (and ours) every replica gets a headless Service, so a job caches
  1 + 5 + 5 objects, like the ``scale`` scenario's TFJobs; PyTorch workers also get the
  ``init-pytorch`` container from both operators.
- Binding: every pod template carries ``nodeName`` (job i on kwok node i mod N), so the pods
  are bound at creation and there is no scheduler: at 50,000 pods its default client QPS of 50
  would take 17 minutes by itself. The same for both contenders.
- No controller-manager: nothing else (EndpointSlices for 50,000 Services, GC) loads the API
  server. etcd's quota is 8 GiB (the default 2 GiB is close at 110,000 objects with their
  history), and the API server takes 1,000 requests in flight (500 mutating) with its watch
  cache on (the default), so the operators' lists are served from memory.
- Each operator gets QPS 500 / burst 1000 and 4 workers (ours ``--workers``, Go
  ``--controller-threads``), as in ``scale``.

Measured: RSS when ready (idle), peak (``VmHWM``) and after all pods are Running and 15 s of
quiet, CPU from ready to then (``/proc``), time from the first job's create to the last pod's
create (audit log) and to the last job's ``Running`` (its ``lastTransitionTime``, one-second
precision), and per job the latency from ``creationTimestamp`` to ``Running`` (both stamps
whole seconds: ±1 s per job), p50/p99/max. Per cached object: (RSS - idle RSS) / (jobs + pods
+ services). Wall times share the 2 cores with the API server, etcd and kwok: noisy.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import scale_stats as st
import suite
from suite import DRIVER, MEASURED, NS, PODS, SERVICES, Cluster, KubeApi, Obj, Outcome, Resource

PYTORCHJOBS = Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
WORKERS_PER_JOB = 4
PODS_PER_JOB = WORKERS_PER_JOB + 1
NODES = 50
QPS, BURST, THREADS = 500, 1000, 4
ETCD_QUOTA = 8 * 1024**3


def jobs_wanted() -> int:
    return int(os.environ.get("BENCH_SCALE_JOBS", "10000"))


def pytorchjob(name: str, node: str) -> Obj:
    def template() -> Obj:
        return {
            "metadata": {},
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "pytorch",
                        "image": "bench:1",
                        # Go's defaulting webhook would add it; it is not called here.
                        "ports": [{"name": "pytorchjob-port", "containerPort": 23456}],
                    }
                ],
            },
        }

    def replicas(n: int) -> Obj:
        # No exit code: kwok keeps the pods Running until deleted.
        return {"replicas": n, "restartPolicy": "OnFailure", "template": template()}

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "pytorchReplicaSpecs": {"Master": replicas(1), "Worker": replicas(WORKERS_PER_JOB)}
        },
    }


def contenders() -> list[str]:
    """``BENCH_SCALE_CONTENDERS`` (``ours,go`` by default) names whom to run: a full run takes
    most of an hour, so the two may be measured in separate sittings (``BENCH_GO=0`` still
    leaves Go out)."""
    named = os.environ.get("BENCH_SCALE_CONTENDERS", "ours,go").split(",")
    go = os.environ.get("BENCH_GO", "1") != "0" and suite.GO_TRAINING.exists()
    return [w for w in ("ours", "go") if w in named and (w != "go" or go)]


async def scenario(base: Path, jobs: int) -> list[Outcome]:
    out = []
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for who in contenders():
        print(f"  scale-50k: {who}, {jobs} jobs ...", flush=True)
        out.append(await _one(who, base / who, jobs))
        out[-1].extra["measured_at"] = now
        # Printed at once: a run cut short still leaves the contenders it finished.
        shown = {k: v for k, v in out[-1].extra.items() if k not in ("rss_samples", "job_timeline")}
        print(f"  {who}: {json.dumps(_headline(out[-1]) | shown)}", flush=True)
    return out + _kept(jobs, ran={o.contender for o in out})


def _kept(jobs: int, *, ran: set[str]) -> list[Outcome]:
    """The contenders not run this time, from the results file when it measured the same
    number of jobs: each keeps its ``measured_at``, so the file says which sitting it is."""
    path = suite.RESULTS / "scale-50k.json"
    if not path.exists():
        return []
    doc = json.loads(path.read_text())
    if (doc.get("setup") or {}).get("jobs") != jobs:
        return []
    fields = {f.name for f in dataclasses.fields(Outcome)}
    kept = []
    for o in doc.get("outcomes") or []:
        if o.get("contender") not in ran:
            outcome = Outcome(**{k: v for k, v in o.items() if k in fields})
            outcome.extra.setdefault("measured_at", doc.get("when"))
            kept.append(outcome)
    return kept


def _headline(o: Outcome) -> Obj:
    keys = ("seconds_to_all_pods", "seconds_to_all_done", "pods", "cpu_seconds")
    return {k: getattr(o, k) for k in (*keys, "peak_rss_mb", "rss_mb")}


def _cluster(workdir: Path) -> Cluster:
    return Cluster(
        workdir,
        scheduler=False,
        kwok_nodes=NODES,
        extra_etcd_args=[f"--quota-backend-bytes={ETCD_QUOTA}"],
    )


async def _one(who: str, workdir: Path, jobs: int) -> Outcome:
    want = jobs * PODS_PER_JOB
    samples: list[tuple[float, float]] = []
    with _cluster(workdir) as cluster:
        crds = suite.go_crds() if who == "go" else suite.OUR_CRDS
        async with suite.driver(cluster, crds) as kube:
            if who == "ours":
                proc = await suite.start_ours(cluster, QPS, BURST, f"--workers={THREADS}")
            else:
                proc = await suite.start_go_training(cluster, QPS, BURST, THREADS)
            sampler = asyncio.create_task(_sample(proc, samples))
            try:
                idle_rss = proc.stats()[0]
                sem = asyncio.Semaphore(64)

                async def submit(i: int) -> None:
                    async with sem:
                        body = pytorchjob(f"pt-{i:05d}", f"kwok-node-{i % NODES}")
                        await kube.create(PYTORCHJOBS, body, namespace=NS)

                await asyncio.gather(*(submit(i) for i in range(jobs)))
                items = await _wait_running(kube, jobs, want, timeout=45 * 60)
                await asyncio.sleep(15)
                rss, peak, cpu = proc.stats()
            finally:
                sampler.cancel()
                proc.stop()
            restart = await _restart(cluster) if who == "ours" and restart_wanted() else {}
        await suite._wait_audit(cluster)
        audit = _audit(cluster.audit_log, MEASURED[who])
    latencies, missing = st.running_latencies(items)
    kb = st.per_object_kb(rss_mb=rss, idle_mb=idle_rss, objects=jobs + want + want)
    objects = jobs + want + want
    t0 = audit["first_driver_create"]
    last_running = max((st.running_since(j) or 0.0) for j in items)
    pods = audit["pod_creates"]
    return Outcome(
        who,
        jobs,
        seconds_to_all_pods=round(pods[-1] - t0, 1) if pods else None,
        seconds_to_all_done=round(last_running - t0, 1),
        pods=len(pods),
        cpu_seconds=round(cpu - proc.cpu_at_ready, 1),
        peak_rss_mb=round(peak, 1),
        rss_mb=round(rss, 1),
        ready_seconds=round(proc.ready, 2),
        requests=audit["requests"],
        pod_timeline=[round(t - t0, 2) for t in pods],
        extra={
            "idle_rss_mb": round(idle_rss, 1),
            "objects_cached": objects,
            "kb_per_object": round(kb, 2),
            "latency_p50": st.percentile(latencies, 50),
            "latency_p99": st.percentile(latencies, 99),
            "latency_max": max(latencies) if latencies else None,
            "jobs_not_running": missing,
            **restart,
            # Per job, seconds from the first create to its creation and to its Running: shows
            # whether Running comes job by job or in waves behind the queue.
            "job_timeline": _job_timeline(items, t0),
            "rss_samples": [(round(t, 1), round(m, 1)) for t, m in samples],
        },
    )


def restart_wanted() -> bool:
    return os.environ.get("BENCH_SCALE_RESTART", "0") != "0"


async def _restart(cluster: Cluster) -> Obj:
    """Ours started again once every object exists: its first read (a streamed list, or LISTs)
    brings all of them at once (the relist at start or after a 410). Time to ready, peak RSS
    (``VmHWM``) and RSS once RSS has not grown for 20 s (at least 60 s after ready: the old
    leader's Lease may have to expire)."""
    print("    restarting ours on the full cluster ...", flush=True)
    proc = await suite.start_ours(cluster, QPS, BURST, f"--workers={THREADS}")
    try:
        idle = proc.stats()[0]
        start = last_growth = time.monotonic()
        top = idle
        while time.monotonic() - start < 60 or time.monotonic() - last_growth < 20:
            await asyncio.sleep(2)
            now = proc.stats()[0]
            if now > top + 1.0:
                top, last_growth = now, time.monotonic()
        rss, peak, cpu = proc.stats()
    finally:
        proc.stop()
    return {
        "restart_ready_seconds": round(proc.ready, 2),
        "restart_idle_rss_mb": round(idle, 1),
        "restart_rss_mb": round(rss, 1),
        "restart_peak_rss_mb": round(peak, 1),
        "restart_cpu_seconds": round(cpu - proc.cpu_at_ready, 1),
    }


def _job_timeline(items: list[Obj], t0: float) -> list[tuple[float, float | None]]:
    out = []
    for job in items:
        created = st.ts(job["metadata"]["creationTimestamp"]) - t0
        running = st.running_since(job)
        out.append((round(created, 1), None if running is None else round(running - t0, 1)))
    return sorted(out, key=lambda p: p[0])


async def _sample(proc: suite.Proc, samples: list[tuple[float, float]]) -> None:
    start = time.monotonic()
    with contextlib.suppress(OSError):
        while True:
            samples.append((time.monotonic() - start, proc.stats()[0]))
            await asyncio.sleep(2)


async def _wait_running(kube: KubeApi, jobs: int, want: int, timeout: float) -> list[Obj]:
    """The jobs once every one is Running and every pod and Service exists (so the caches hold
    them all when RSS is read)."""
    deadline = time.monotonic() + timeout
    every = max(2.0, jobs / 1000)
    while True:
        items, _ = await kube.list(PYTORCHJOBS, namespace=NS, limit=2000)
        running = sum(1 for j in items if st.running_since(j) is not None)
        print(f"    {running}/{jobs} jobs Running", flush=True)
        if running == jobs:
            pods = await suite.count(kube, PODS)
            if pods >= want and await suite.count(kube, SERVICES) >= want:
                return items
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out: {running}/{jobs} jobs Running")
        await asyncio.sleep(every)


def _audit(log: Path, user: str) -> dict[str, Any]:
    """What the scenario needs from the audit log, read line by line (at 50,000 pods it holds
    hundreds of thousands of entries; suite.Cluster.audit would keep them all)."""
    requests: dict[str, int] = {}
    pod_creates: list[float] = []
    first = float("inf")
    with log.open() as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("stage") != "ResponseComplete":
                continue
            ref = e.get("objectRef") or {}
            name = (e.get("user") or {}).get("username")
            if name == user:
                res = ref.get("resource", "?")
                res += f"/{ref['subresource']}" if ref.get("subresource") else ""
                key = f"{e['verb']} {res}"
                requests[key] = requests.get(key, 0) + 1
            in_ns = ref.get("namespace") == NS
            create = e.get("verb") == "create"
            if name == DRIVER and create and ref.get("resource") == "pytorchjobs":
                first = min(first, st.ts(e["requestReceivedTimestamp"]))
            elif (
                in_ns
                and name != DRIVER
                and e.get("verb") == "create"
                and ref.get("resource") == "pods"
                and not ref.get("subresource")
                and (e.get("responseStatus") or {}).get("code") == 201
            ):
                pod_creates.append(st.ts(e["stageTimestamp"]))
    ordered = dict(sorted(requests.items(), key=lambda kv: -kv[1]))
    return {"requests": ordered, "pod_creates": sorted(pod_creates), "first_driver_create": first}


def setup(jobs: int) -> Obj:
    return {
        "jobs": jobs,
        "kind": "PyTorchJob",
        "pods_per_job": PODS_PER_JOB,
        "services_per_job": PODS_PER_JOB,
        "kwok_nodes": NODES,
        "binding": "nodeName in the pod template (no scheduler)",
        "qps": QPS,
        "burst": BURST,
        "workers": THREADS,
        "etcd_quota_bytes": ETCD_QUOTA,
    }
