"""``init-pytorch``: Worker pods wait until the Master accepts connections before training.

A worker whose ``init_process_group`` runs before the master is reachable crashes with "host
not found" (pytorch-operator #125). The anchor's init container loops on ``nslookup`` of the
master's name, which is not enough: the name can resolve seconds before the master's port is
open (pytorch-operator #333), and busybox's own ``nslookup`` mishandles the DNS search path
(pytorch-operator #216). This one loops on ``nc -z -w 2 <host> <port>`` instead: ``nc``
resolves the short name through the C library, with the search path the training process
will use, and succeeds only once the port accepts a TCP connection, so "resolves" and
"listens" are checked together. Any image with a shell, ``seq``, ``grep`` and an ``nc`` that
knows ``-z`` works: the official busybox images (the default), alpine, or one with
netcat-openbsd. Some distributions build busybox without ``-z`` (Debian's); the script checks
first and exits at once with a message naming the flag to change, rather than waiting in vain.

The loop gives up after ``max_tries`` attempts two seconds apart (the anchor's #1756 fix for
workers that waited forever); the pod's restart policy then decides what happens next. The
host, port and tries go in as environment variables so the script itself is a constant.
"""

from __future__ import annotations

from typing import Any

from pytorch_operator.api import PyTorchJob, PyTorchReplicaType
from pytorch_operator.env import replica_port

__all__ = [
    "DEFAULT_INIT_CONTAINER_IMAGE",
    "DEFAULT_INIT_CONTAINER_MAX_TRIES",
    "INIT_CONTAINER_NAME",
    "WAIT_FOR_MASTER_SCRIPT",
    "add_init_container",
    "init_container",
]

INIT_CONTAINER_NAME = "init-pytorch"
DEFAULT_INIT_CONTAINER_IMAGE = "busybox:1.36"
DEFAULT_INIT_CONTAINER_MAX_TRIES = 100

WAIT_FOR_MASTER_SCRIPT = """\
if nc -z -w 1 127.0.0.1 1 2>&1 | grep -q "invalid option"; then
  echo "this image's nc has no -z option; choose another --pytorch-init-container-image"
  exit 2
fi
for i in $(seq "$MAX_TRIES"); do
  if nc -z -w 2 "$MASTER_ADDR" "$MASTER_PORT"; then
    echo "master $MASTER_ADDR:$MASTER_PORT accepts connections"
    exit 0
  fi
  echo "waiting for master $MASTER_ADDR:$MASTER_PORT ($i/$MAX_TRIES)"
  sleep 2
done
echo "master $MASTER_ADDR:$MASTER_PORT not reachable after $MAX_TRIES tries"
exit 1
"""


def init_container(job: PyTorchJob, *, image: str, max_tries: int) -> dict[str, Any] | None:
    """The init container for the Worker pods of ``job``; None when workers wait for nobody
    (no Master: an elastic job's workers rendezvous among themselves)."""
    if PyTorchReplicaType.MASTER not in job.spec.pytorch_replica_specs:
        return None
    port = replica_port(job, PyTorchReplicaType.MASTER)
    return {
        "name": INIT_CONTAINER_NAME,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", WAIT_FOR_MASTER_SCRIPT],
        "env": [
            {"name": "MASTER_ADDR", "value": f"{job.name}-master-0"},
            {"name": "MASTER_PORT", "value": str(port)},
            {"name": "MAX_TRIES", "value": str(max_tries)},
        ],
        "resources": {
            "limits": {"cpu": "100m", "memory": "20Mi"},
            "requests": {"cpu": "50m", "memory": "10Mi"},
        },
    }


def add_init_container(
    job: PyTorchJob, template: dict[str, Any], *, rtype: str, image: str, max_tries: int
) -> None:
    """Append the init container to a Worker pod template (after the user's own, which may
    stage data first); a template that already has one by that name keeps its own."""
    if rtype != PyTorchReplicaType.WORKER:
        return
    container = init_container(job, image=image, max_tries=max_tries)
    if container is None:
        return
    spec = template.setdefault("spec", {})
    current = spec.setdefault("initContainers", [])
    if any(isinstance(c, dict) and c.get("name") == INIT_CONTAINER_NAME for c in current):
        return
    current.append(container)
