"""TF_CONFIG, byte for byte as the training-operator writes it.

The normal form is Go's ``json.Marshal`` of ``{cluster, task, environment}``: compact, map keys
sorted, ``"environment":"cloud"``. Every replica type is in the cluster map, keyed by its
lower-cased name. Under ``enableDynamicWorker`` it is the sparse form instead (no
``environment``): a worker sees every PS and only itself, a PS only itself and ``worker:{}``,
and other types an empty sparse cluster, as the anchor does.
"""

from __future__ import annotations

import json
from typing import Any

from jobcontroller import listed_names_bytes
from jobcontroller.api import replica_port
from tf_operator.api import TF_PORT, TF_PORT_NAME, TFJob, TFReplicaType


def _host_parts(job: TFJob, rtype: str, *, cluster_domain: str) -> tuple[str, str]:
    """What comes before and after the index in a host name of ``rtype``."""
    suffix = f".{job.namespace}.svc" + (f".{cluster_domain}" if cluster_domain else "")
    port = replica_port(job, rtype, port_name=TF_PORT_NAME, default=TF_PORT)
    return f"{job.name}-{rtype.lower()}-", f"{suffix}:{port}"


def hosts(job: TFJob, rtype: str, *, cluster_domain: str = "") -> list[str]:
    """``<job>-<rtype>-<i>.<ns>.svc[.<domain>]:<port>`` for every index of ``rtype``."""
    spec = job.spec.tf_replica_specs[rtype]
    before, after = _host_parts(job, rtype, cluster_domain=cluster_domain)
    return [f"{before}{i}{after}" for i in range(spec.replicas or 0)]


def tf_config_bytes(job: TFJob, *, rtype: str, cluster_domain: str = "") -> int:
    """What grows with the job in the TF_CONFIG of the largest pod of ``rtype``, in bytes of
    pod JSON: the host lists (each host quoted inside a JSON string value, so every quote
    costs two bytes) and the indices that name the pod. Arithmetic: O(replica types).
    (core/sizing.py adds it to a pod built for a one-or-two-replica copy of the job.)"""
    if not is_distributed(job):
        return 0
    specs = job.spec.tf_replica_specs

    def listed(rt: str, count: int) -> int:
        before, after = _host_parts(job, rt, cluster_domain=cluster_domain)
        return 2 + listed_names_bytes(prefix=before, suffix=after, count=count, quote=2)

    index = max((specs[rtype].replicas or 0) - 1, 0)
    own = len(str(index))
    if not job.spec.enable_dynamic_worker:
        # Every host of every type, and the pod's task index.
        return sum(listed(rt, spec.replicas or 0) for rt, spec in specs.items()) + own
    ps = next((rt for rt in specs if rt.lower() == TFReplicaType.PS.lower()), None)
    if rtype.lower() == TFReplicaType.WORKER.lower():
        # Every PS, and its own index three times: task, key and host.
        return (listed(ps, specs[ps].replicas or 0) if ps else 0) + 3 * own
    if rtype.lower() == TFReplicaType.PS.lower():
        return 2 * own  # its own host and task index
    return own


def is_distributed(job: TFJob) -> bool:
    """A job whose replicas add up to exactly one gets no TF_CONFIG."""
    return sum(s.replicas or 0 for s in job.spec.tf_replica_specs.values()) != 1


def tf_config(job: TFJob, *, rtype: str, index: int, cluster_domain: str = "") -> str:
    cluster = {
        rt.lower(): hosts(job, rt, cluster_domain=cluster_domain)
        for rt in job.spec.tf_replica_specs
    }
    task = {"type": rtype.lower(), "index": index}
    config: dict[str, Any]
    if job.spec.enable_dynamic_worker:
        sparse: dict[str, Any] = {"worker": {}, "ps": []}
        if rtype.lower() == "worker":
            # Without PS, v1.9 marshals its nil slice: "ps":null.
            sparse = {"worker": {str(index): cluster["worker"][index]}, "ps": cluster.get("ps")}
        elif rtype.lower() == "ps":
            sparse = {"worker": {}, "ps": [cluster["ps"][index]]}
        config = {"cluster": sparse, "task": task}
    else:
        config = {"cluster": dict(sorted(cluster.items())), "task": task, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))
