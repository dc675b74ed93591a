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

from tf_operator.api import TF_CONTAINER_NAME, TF_PORT, TF_PORT_NAME, TFJob


def _port(job: TFJob, rtype: str) -> int:
    template = job.spec.tf_replica_specs[rtype].template
    for container in template.get("spec", {}).get("containers", []):
        if container.get("name") != TF_CONTAINER_NAME:
            continue
        for port in container.get("ports") or []:
            if port.get("name") == TF_PORT_NAME:
                return int(port.get("containerPort", TF_PORT))
    return TF_PORT


def hosts(job: TFJob, rtype: str, *, cluster_domain: str = "") -> list[str]:
    """``<job>-<rtype>-<i>.<ns>.svc[.<domain>]:<port>`` for every index of ``rtype``."""
    spec = job.spec.tf_replica_specs[rtype]
    suffix = f".{job.namespace}.svc" + (f".{cluster_domain}" if cluster_domain else "")
    port = _port(job, rtype)
    rt = rtype.lower()
    return [f"{job.name}-{rt}-{i}{suffix}:{port}" for i in range(spec.replicas or 0)]


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
