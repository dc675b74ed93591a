"""The install manifests of an operator built on :class:`JobController`: its CRDs, its
least-privilege RBAC and its Deployment, derived from the controllers themselves.

``<operator> crd`` and ``<operator> manifests`` print them (every operator made with
``run_job_operator`` has both subcommands), and ``hack/gen-crds.py`` writes the CRDs of
manifests/base from the same controllers, so what a new operator ships and what the project's
own operators ship come from one path. The RBAC a controller needs follows from what it
reconciles: its job kind (and status, and finalizers for ownerReferences), pods and services,
events, and every kind in its ``owned_resources``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Sequence
from typing import Any

from jobcontroller.controller import Reconciler
from jobcontroller.core.types import SERVICE

__all__ = [
    "DEFAULT_IMAGE",
    "cluster_role_rules",
    "crds",
    "operator_manifests",
    "served_ports",
    "service",
    "to_yaml",
]

Obj = dict[str, Any]

DEFAULT_IMAGE = "kubeflow-operators-py"
"""The Deployment's image: a placeholder for kustomize's ``images:`` to point at a registry."""

_CHILD_VERBS = ["get", "list", "watch", "create", "delete"]
_OWNED_VERBS = ["get", "list", "watch", "create", "patch", "delete"]


def crds(controllers: Iterable[Reconciler[Any]]) -> list[Obj]:
    """The CustomResourceDefinition of every controller's job kind."""
    return [controller.crd() for controller in controllers]


def cluster_role_rules(controllers: Sequence[Reconciler[Any]]) -> list[Obj]:
    """The ClusterRole rules the controllers need, nothing more."""
    rules: list[Obj] = []
    for c in controllers:
        plural, group = c.model.PLURAL, c.model.GROUP
        rules += [
            {"apiGroups": [group], "resources": [plural], "verbs": list(c.job_verbs)},
            {"apiGroups": [group], "resources": [f"{plural}/status"], "verbs": ["get", "update"]},
            {"apiGroups": [group], "resources": [f"{plural}/finalizers"], "verbs": ["update"]},
        ]
    with_pods = [c for c in controllers if c.owns_pods]
    patched = {kind for c in with_pods for kind in c.patched_children}
    if SERVICE in patched:
        rules.append({"apiGroups": [""], "resources": ["pods"], "verbs": _CHILD_VERBS})
        rules.append(
            {"apiGroups": [""], "resources": ["services"], "verbs": [*_CHILD_VERBS, "patch"]}
        )
    elif with_pods:
        rules.append({"apiGroups": [""], "resources": ["pods", "services"], "verbs": _CHILD_VERBS})
    rules.append({"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]})
    if any(c.config.node_lost_grace_seconds > 0 for c in with_pods):
        rules.append(_NODE_RULE)
    by_group: dict[str, list[str]] = {}
    for c in controllers:
        for resource in c.owned_resources.values():
            plurals = by_group.setdefault(resource.group, [])
            if resource.plural not in plurals:
                plurals.append(resource.plural)
    rules += [
        {"apiGroups": [group], "resources": plurals, "verbs": list(_OWNED_VERBS)}
        for group, plurals in by_group.items()
    ]
    read: dict[str, list[str]] = {}
    for c in controllers:
        for resource in c.read_resources.values():
            plurals = read.setdefault(resource.group, [])
            if resource.plural not in plurals:
                plurals.append(resource.plural)
    rules += [
        {"apiGroups": [group], "resources": plurals, "verbs": ["get", "list", "watch"]}
        for group, plurals in read.items()
    ]
    required = [name for c in controllers for name in (*c.required_crds, *c.optional_crds)]
    if required:
        rules.append(
            {
                "apiGroups": ["apiextensions.k8s.io"],
                "resources": ["customresourcedefinitions"],
                "resourceNames": list(dict.fromkeys(required)),
                "verbs": ["get"],
            }
        )
    if any(c.config.gang_scheduler_name for c in with_pods):
        rules += _GANG_RULES
    for c in controllers:
        extra = (*c.extra_rules, *c.progress_rules())
        rules += [copy.deepcopy(rule) for rule in extra if rule not in rules]
    return rules


#: NodeLost (--node-lost-grace-period): the node informer reads every node's Ready condition.
#: Nodes are cluster-scoped, so the namespaced overlays grant this with a ClusterRoleBinding.
_NODE_RULE: Obj = {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch"]}


#: What --gang-scheduler-name needs (manifests/components/gang-scheduling grants the same):
#: the PodGroups, a look at whether their CRD is installed, and PriorityClass values.
_GANG_RULES: list[Obj] = [
    {
        "apiGroups": ["scheduling.volcano.sh", "scheduling.x-k8s.io"],
        "resources": ["podgroups"],
        "verbs": _OWNED_VERBS,
    },
    {
        "apiGroups": ["apiextensions.k8s.io"],
        "resources": ["customresourcedefinitions"],
        "resourceNames": ["podgroups.scheduling.volcano.sh", "podgroups.scheduling.x-k8s.io"],
        "verbs": ["get"],
    },
    {
        "apiGroups": ["scheduling.k8s.io"],
        "resources": ["priorityclasses"],
        "verbs": ["get", "list", "watch"],
    },
]


def _labels(name: str, **extra: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, **extra}


def _binding(kind: str, name: str, namespace: str, role_kind: str, role: str) -> Obj:
    account = name.removesuffix("-leader-election")
    meta: Obj = {"name": name, "labels": _labels(account)}
    if kind == "RoleBinding":
        meta = {"name": name, "namespace": namespace, "labels": meta["labels"]}
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role},
        "subjects": [
            {
                "kind": "ServiceAccount",
                "name": name.removesuffix("-leader-election"),
                "namespace": namespace,
            }
        ],
    }


def rbac(name: str, controllers: Sequence[Reconciler[Any]], *, namespace: str) -> list[Obj]:
    """ServiceAccount, ClusterRole and its binding, and the leader-election Role (the Lease in
    the operator's own namespace only) and its binding."""
    election = f"{name}-leader-election"
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": _labels(name)},
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": _labels(name)},
            "rules": cluster_role_rules(controllers),
        },
        _binding("ClusterRoleBinding", name, namespace, "ClusterRole", name),
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": election, "namespace": namespace, "labels": _labels(name)},
            "rules": [
                {
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "verbs": ["get", "create", "update"],
                }
            ],
        },
        _binding("RoleBinding", election, namespace, "Role", election),
    ]


def served_ports(controllers: Sequence[Reconciler[Any]]) -> list[tuple[str, int]]:
    """The endpoints the controllers serve to the cluster's pods (their ``served_ports``)."""
    return list(
        dict.fromkeys(p for c in controllers for p in (*c.served_ports, *c.progress_ports()))
    )


def service(name: str, *, namespace: str, ports: Sequence[tuple[str, int]]) -> Obj:
    """The Service named after the operator, in front of every replica, for ``ports``."""
    selector = _labels(name, **{"app.kubernetes.io/component": "controller"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": _labels(name)},
        "spec": {
            "selector": selector,
            "ports": [
                {"name": port_name, "port": port, "targetPort": port_name, "protocol": "TCP"}
                for port_name, port in ports
            ],
        },
    }


def deployment(
    name: str,
    *,
    namespace: str,
    image: str = DEFAULT_IMAGE,
    args: Sequence[str] = (),
    ports: Sequence[tuple[str, int]] = (),
) -> Obj:
    """Two replicas behind a Lease (the standby keeps warm caches), non-root with a read-only
    root filesystem, JSON logs, metrics on 8080 and probes on 8081; ``ports``: more endpoints
    (the TrainJob progress endpoint's 10443)."""
    selector = _labels(name, **{"app.kubernetes.io/component": "controller"})
    restricted = {
        "runAsNonRoot": True,
        "runAsUser": 65532,
        "runAsGroup": 65532,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(selector)},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {
                        **restricted,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "affinity": {
                        "podAntiAffinity": {
                            "preferredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "weight": 100,
                                    "podAffinityTerm": {
                                        "topologyKey": "kubernetes.io/hostname",
                                        "labelSelector": {"matchLabels": _labels(name)},
                                    },
                                }
                            ]
                        }
                    },
                    "containers": [
                        {
                            "name": "operator",
                            "image": image,
                            "command": [name, "run"],
                            "args": [
                                "--leader-elect",
                                "--leader-election-namespace=$(POD_NAMESPACE)",
                                "--log-format=json",
                                "--metrics-port=8080",
                                "--health-port=8081",
                                *args,
                            ],
                            "env": [
                                {
                                    "name": "POD_NAMESPACE",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                                }
                            ],
                            "ports": [
                                {"name": "metrics", "containerPort": 8080},
                                {"name": "health", "containerPort": 8081},
                                *({"name": n, "containerPort": p} for n, p in ports),
                            ],
                            "livenessProbe": {
                                "httpGet": {"path": "/healthz", "port": "health"},
                                "initialDelaySeconds": 10,
                                "periodSeconds": 20,
                            },
                            "readinessProbe": {
                                "httpGet": {"path": "/readyz", "port": "health"},
                                "periodSeconds": 10,
                            },
                            "resources": {
                                "requests": {"cpu": "100m", "memory": "256Mi"},
                                "limits": {"cpu": "1", "memory": "512Mi"},
                            },
                            "securityContext": {
                                **restricted,
                                "readOnlyRootFilesystem": True,
                                "allowPrivilegeEscalation": False,
                                "capabilities": {"drop": ["ALL"]},
                                "seccompProfile": {"type": "RuntimeDefault"},
                            },
                            "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                        }
                    ],
                    # /tmp also holds the crash-loop guard's record (--state-dir's default):
                    # an emptyDir outlives the container's restarts, an OOM kill included.
                    "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}],
                },
            },
        },
    }


def operator_manifests(
    name: str,
    controllers: Sequence[Reconciler[Any]],
    *,
    namespace: str = "kubeflow",
    image: str = DEFAULT_IMAGE,
    with_crds: bool = True,
    args: Sequence[str] = (),
) -> list[Obj]:
    """Everything to install operator ``name`` (its console script) running ``controllers``:
    the Namespace, CRDs, RBAC and the Deployment (``args``: more ``run`` flags), in apply
    order."""
    objects: list[Obj] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    ]
    if with_crds:
        objects += crds(controllers)
    ports = served_ports(controllers)
    objects += [
        *rbac(name, controllers, namespace=namespace),
        deployment(name, namespace=namespace, image=image, args=args, ports=ports),
    ]
    if ports:
        objects.append(service(name, namespace=namespace, ports=ports))
    return objects


def to_yaml(objects: Iterable[Obj]) -> str:
    """A multi-document YAML stream, keys in the order given."""
    import yaml  # the `run` command never needs it

    return "".join(
        "---\n" + yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=100)
        for obj in objects
    )
