"""Bytes a cached pod and Service cost ours, as the ``scale-50k`` scenario's caches hold them.

Builds ``--jobs`` PyTorchJobs' worth of objects shaped as the API server serves them in that
scenario (a Running pod as kwok reports it: init container terminated, container running,
three conditions; a headless Service per pod; copied from a run's ``kubectl get -o json``),
decodes each from JSON with the API codec as the informer does, applies the cache's projection
and stores it in a :class:`~jobcontroller.runtime.store.Store` with the pod caches' indexes
(owner uid; node name for pods). Prints, per object:

- ``tracemalloc``: bytes allocated and still held after building all of them (the store's
  share included), divided by the number of objects;
- a deep ``sys.getsizeof`` walk of what one projected object holds alone (not the parts it
  shares with other cached objects, nor interned strings);
- the store's own share (keys and index entries);
- the peak of a relist of the pods: one LIST answer decoded whole, against pages of 500.

Timestamps advance one second every 50 pods, as when an operator creates pods at ~50/s
(``--per-second 1``: every pod's stamps its own, the least sharing).

Usage: ``uv run python bench/bench_cache_object.py [--jobs 1000]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import sys
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from jobcontroller.controller.nodes import NODE_NAME_INDEX, pod_node_name
from jobcontroller.runtime import codec
from jobcontroller.runtime.projection import (
    SharedDict,
    SharedList,
    project_pod,
    project_service,
    shared_parts,
)
from jobcontroller.runtime.store import Store

Obj = dict[str, Any]
PER_JOB = 5
NODES = 50


START = dt.datetime(2026, 11, 26, 19, 29, tzinfo=dt.UTC)
#: Pods created (and started) per second: pods stamped the same second share more parts.
PER_SECOND = [50]


def _stamp(i: int) -> str:
    return (START + dt.timedelta(seconds=i // PER_SECOND[0])).strftime("%Y-%m-%dT%H:%M:%SZ")


def _labels(job: str, rtype: str, index: int) -> dict[str, str]:
    labels = {
        "training.kubeflow.org/job-name": job,
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/replica-index": str(index),
        "training.kubeflow.org/replica-type": rtype,
    }
    if rtype == "master":
        labels["training.kubeflow.org/job-role"] = "master"
    return labels


def _meta(job: str, job_uid: str, name: str, rtype: str, index: int, n: int) -> Obj:
    return {
        "creationTimestamp": _stamp(n),
        "labels": _labels(job, rtype, index),
        "name": name,
        "namespace": "bench",
        "ownerReferences": [
            {
                "apiVersion": "kubeflow.org/v1",
                "blockOwnerDeletion": True,
                "controller": True,
                "kind": "PyTorchJob",
                "name": job,
                "uid": job_uid,
            }
        ],
        "resourceVersion": str(1000 + 3 * n),
        "uid": str(uuid.uuid4()),
    }


def _env(job: str, rank: int) -> list[Obj]:
    pairs = [
        ("PYTHONUNBUFFERED", "1"),
        ("MASTER_PORT", "23456"),
        ("PET_MASTER_PORT", "23456"),
        ("MASTER_ADDR", f"{job}-master-0"),
        ("PET_MASTER_ADDR", f"{job}-master-0"),
        ("WORLD_SIZE", "5"),
        ("RANK", str(rank)),
        ("PET_NODE_RANK", str(rank)),
        ("PET_NPROC_PER_NODE", "auto"),
        ("PET_NNODES", "5"),
    ]
    return [{"name": k, "value": v} for k, v in pairs]


def running_pod(job: str, job_uid: str, rtype: str, index: int, n: int) -> Obj:
    """A pod of the scenario as kwok reports it Running."""
    name = f"{job}-{rtype}-{index}"
    stamp = _stamp(n)
    cond = [
        {"lastProbeTime": None, "lastTransitionTime": stamp, "status": "True", "type": t}
        for t in ("Initialized", "Ready", "ContainersReady")
    ]
    spec: Obj = {
        "containers": [
            {
                "env": _env(job, index + (rtype == "worker")),
                "image": "bench:1",
                "imagePullPolicy": "IfNotPresent",
                "name": "pytorch",
                "ports": [{"containerPort": 23456, "name": "pytorchjob-port", "protocol": "TCP"}],
                "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ],
        "dnsPolicy": "ClusterFirst",
        "enableServiceLinks": True,
        "nodeName": f"kwok-node-{n // PER_JOB % NODES}",
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
        "restartPolicy": "OnFailure",
        "schedulerName": "default-scheduler",
        "securityContext": {},
        "terminationGracePeriodSeconds": 30,
        "tolerations": [
            {
                "effect": "NoExecute",
                "key": f"node.kubernetes.io/{k}",
                "operator": "Exists",
                "tolerationSeconds": 300,
            }
            for k in ("not-ready", "unreachable")
        ],
    }
    status: Obj = {
        "conditions": cond,
        "containerStatuses": [
            {
                "image": "bench:1",
                "imageID": "",
                "lastState": {},
                "name": "pytorch",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": stamp}},
            }
        ],
        "hostIP": "10.1.0.1",
        "hostIPs": [{"ip": "10.1.0.1"}],
        "phase": "Running",
        "podIP": f"10.244.{n // 250}.{n % 250 + 2}",
        "podIPs": [{"ip": f"10.244.{n // 250}.{n % 250 + 2}"}],
        "qosClass": "BestEffort",
        "startTime": stamp,
    }
    if rtype == "worker":
        script = 'while ! nc -z -w 2 "$MASTER_ADDR" "$MASTER_PORT"; do sleep 2; done\n' * 8
        spec["initContainers"] = [
            {
                "command": ["sh", "-c", script],
                "env": [
                    {"name": "MASTER_ADDR", "value": f"{job}-master-0"},
                    {"name": "MASTER_PORT", "value": "23456"},
                    {"name": "MAX_TRIES", "value": "0"},
                ],
                "image": "busybox:1.36",
                "imagePullPolicy": "IfNotPresent",
                "name": "init-pytorch",
                "resources": {
                    "limits": {"cpu": "100m", "memory": "20Mi"},
                    "requests": {"cpu": "50m", "memory": "10Mi"},
                },
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
            }
        ]
        status["initContainerStatuses"] = [
            {
                "image": "busybox:1.36",
                "imageID": "",
                "lastState": {},
                "name": "init-pytorch",
                "ready": True,
                "restartCount": 0,
                "state": {
                    "terminated": {
                        "exitCode": 0,
                        "finishedAt": stamp,
                        "reason": "Completed",
                        "startedAt": stamp,
                    }
                },
            }
        ]
        status["qosClass"] = "Burstable"
    meta = _meta(job, job_uid, name, rtype, index, n)
    meta["generation"] = 1
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def headless_service(job: str, job_uid: str, rtype: str, index: int, n: int) -> Obj:
    name = f"{job}-{rtype}-{index}"
    selector = _labels(job, rtype, index)
    selector.pop("training.kubeflow.org/job-role", None)
    meta = _meta(job, job_uid, name, rtype, index, n)
    meta["labels"] = dict(selector)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "clusterIP": "None",
            "clusterIPs": ["None"],
            "internalTrafficPolicy": "Cluster",
            "ipFamilies": ["IPv4"],
            "ipFamilyPolicy": "SingleStack",
            "ports": [
                {"name": "pytorchjob-port", "port": 23456, "protocol": "TCP", "targetPort": 23456}
            ],
            "selector": selector,
            "sessionAffinity": "None",
            "type": "ClusterIP",
        },
        "status": {"loadBalancer": {}},
    }


def wire(jobs: int, make: Callable[[str, str, str, int, int], Obj]) -> list[bytes]:
    """Every object of ``jobs`` jobs as the API server sends it (JSON)."""
    out = []
    n = 0
    for j in range(jobs):
        job, job_uid = f"pt-{j:05d}", str(uuid.uuid4())
        for rtype, index in [("master", 0), *(("worker", i) for i in range(PER_JOB - 1))]:
            out.append(json.dumps(make(job, job_uid, rtype, index, n)).encode())
            n += 1
    return out


def deep_size(value: Any, seen: set[int] | None = None, *, own: bool = False) -> int:
    """Bytes of ``value`` and everything it refers to, each object once; ``own``: not the
    parts shared with other cached objects (nor interned strings)."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return 0
    if own and (isinstance(value, SharedDict | SharedList) or _interned(value)):
        return 0
    seen.add(id(value))
    size = sys.getsizeof(value)
    if isinstance(value, dict):
        size += sum(
            deep_size(k, seen, own=own) + deep_size(v, seen, own=own) for k, v in value.items()
        )
    elif isinstance(value, list | tuple | set | frozenset):
        size += sum(deep_size(v, seen, own=own) for v in value)
    return size


def _interned(value: Any) -> bool:
    return isinstance(value, str) and sys.intern(value) is value


def fill(lines: list[bytes], transform: Callable[[Obj], Obj], *, pods: bool) -> tuple[Store, int]:
    """A store filled from ``lines``; returns it and the bytes it holds (tracemalloc)."""
    gc.collect()
    tracemalloc.start()
    store = Store()
    if pods:
        store.add_index(NODE_NAME_INDEX, pod_node_name)
    for line in lines:
        store.upsert(transform(codec.loads(line)))
    gc.collect()
    held, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return store, held


def store_share(store: Store) -> int:
    """Keys and index entries: the store minus the objects."""
    objects = {id(o) for o in store.list()}
    seen: set[int] = set(objects)
    return deep_size(store._items, seen) + deep_size(store._indexes, seen)


def relist_peak(lines: list[bytes], page: int) -> tuple[int, int]:
    """Peak and held bytes of listing ``lines`` as the informer does: LIST answers of ``page``
    items (0: one answer), each decoded whole, its items projected one by one. The bodies
    are built beforehand and not counted; the stores' indexes are left out."""
    size = page or len(lines)
    bodies = [
        b'{"kind":"PodList","metadata":{},"items":[' + b",".join(lines[i : i + size]) + b"]}"
        for i in range(0, len(lines), size)
    ]
    gc.collect()
    tracemalloc.start()
    kept = []
    for body in bodies:
        answer = codec.loads(body)
        for item in answer.pop("items"):
            kept.append(project_pod(item))
        del answer
    gc.collect()
    held, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak, held


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--per-second", type=int, default=50, help="pods created per second")
    parser.add_argument("--show", action="store_true", help="print one projected pod")
    args = parser.parse_args()
    PER_SECOND[0] = args.per_second
    rows = []
    for kind, make, transform in (
        ("pod", running_pod, project_pod),
        ("service", headless_service, project_service),
    ):
        lines = wire(args.jobs, make)
        store, held = fill(lines, transform, pods=kind == "pod")
        sample = store.get("bench", "pt-00001-worker-1")
        assert sample is not None
        if args.show:
            print(json.dumps(sample, indent=1))
        rows.append(
            {
                "kind": kind,
                "objects": len(store),
                "wire_bytes": round(sum(map(len, lines)) / len(lines)),
                "held_per_object": round(held / len(store)),
                "own_bytes_one": deep_size(sample, own=True),
                "store_share_per_object": round(store_share(store) / len(store)),
            }
        )
    pods = wire(args.jobs, running_pod)
    relist = {}
    for page in (0, 500):
        peak, held = relist_peak(pods, page)
        relist[f"page {page or 'none'}"] = {
            "peak_mb": round(peak / 1e6, 1),
            "held_mb": round(held / 1e6, 1),
            "peak_over_held_mb": round((peak - held) / 1e6, 1),
        }
    print(json.dumps({"objects": rows, "shared_parts": shared_parts()}, indent=1))
    print(json.dumps({f"relist of {len(pods)} pods": relist}, indent=1))


if __name__ == "__main__":
    main()
