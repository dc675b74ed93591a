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

By default the loop has no limit (``max_tries`` 0): a master that loads data for ten minutes
must not fail its workers (under Never) or burn the backoff limit (under OnFailure). The job
bounds the wait instead: its ``activeDeadlineSeconds`` fails it, and a job that fails stops its
running pods, waiting workers included. ``--pytorch-init-container-max-tries`` N keeps v1.9's
meaning, N attempts two seconds apart, after which the pod's restart policy decides. The host,
port and tries go in as environment variables so the script itself is a constant.

Two more of v1.9's knobs: ``--pytorch-init-container-check dns`` waits only until the master's
name resolves, as v1.9 did (``nslookup``), for meshes where an init container cannot open TCP
connections; and ``--pytorch-init-container-template-file`` replaces the container with one
from a YAML list rendered from ``{{.MasterAddr}}``, ``{{.InitContainerImage}}`` and
``{{.MaxTries}}`` (v1.9's fields; ``{{.MasterPort}}`` too), read once at start-up.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from msgspec import Struct

from jobcontroller import (
    CHECK_DNS,
    CHECK_TCP,
    WAIT_FOR_MASTER_DNS_SCRIPT,
    add_init_containers,
    replica_name,
    tcp_wait_script,
    wait_for_replica,
)
from pytorch_operator.api import PyTorchJob, PyTorchReplicaType
from pytorch_operator.env import pytorch_port

__all__ = [
    "CHECK_DNS",
    "CHECK_TCP",
    "DEFAULT_INIT_CONTAINER_IMAGE",
    "DEFAULT_INIT_CONTAINER_MAX_TRIES",
    "DEFAULT_INIT_CONTAINER_TEMPLATE_FILE",
    "INIT_CONTAINER_NAME",
    "WAIT_FOR_MASTER_DNS_SCRIPT",
    "WAIT_FOR_MASTER_SCRIPT",
    "InitContainerTemplate",
    "add_init_container",
    "init_container",
]

INIT_CONTAINER_NAME = "init-pytorch"
DEFAULT_INIT_CONTAINER_IMAGE = "busybox:1.36"
DEFAULT_INIT_CONTAINER_MAX_TRIES = 0
"""No limit: the job's deadline, and the stop of a failed job's pods, bound the wait."""
DEFAULT_INIT_CONTAINER_TEMPLATE_FILE = "/etc/config/initContainer.yaml"
"""v1.9's default path; used when the file exists, as v1.9 does."""

WAIT_FOR_MASTER_SCRIPT = tcp_wait_script(image_hint="choose another --pytorch-init-container-image")

_FIELD = re.compile(r"{{\s*\.(\w+)\s*}}")
_FIELDS = ("MasterAddr", "MasterPort", "InitContainerImage", "MaxTries")


class InitContainerTemplate(Struct, frozen=True):
    """A ``--pytorch-init-container-template-file``: a YAML list of containers with v1.9's
    template fields. Only plain ``{{.Field}}`` substitutions are understood; anything else is
    refused at start-up with the reason, never at pod creation."""

    text: str
    source: str

    @classmethod
    def load(cls, path: str | Path) -> InitContainerTemplate | None:
        """The template at ``path``; None when there is no such file (v1.9 then uses its
        built-in container). Raises ValueError for a template that cannot work."""
        file = Path(path)
        if not file.is_file():
            return None
        template = cls(text=file.read_text(), source=str(file))
        template.render(master_addr="job-master-0", master_port=23456, image="x", max_tries=1)
        return template

    def render(
        self, *, master_addr: str, master_port: int, image: str, max_tries: int
    ) -> list[dict[str, Any]]:
        values = {
            "MasterAddr": master_addr,
            "MasterPort": str(master_port),
            "InitContainerImage": image,
            "MaxTries": str(max_tries),
        }
        unknown = sorted({m.group(1) for m in _FIELD.finditer(self.text)} - set(_FIELDS))
        if unknown or "{{" in _FIELD.sub("", self.text):
            raise ValueError(
                f"{self.source}: only {', '.join('{{.' + f + '}}' for f in _FIELDS)} can be "
                f"used{'; unknown: ' + ', '.join(unknown) if unknown else ''}"
            )
        import yaml  # only with --pytorch-init-container-template-file

        try:
            rendered = yaml.safe_load(_FIELD.sub(lambda m: values[m.group(1)], self.text))
        except yaml.YAMLError as exc:
            raise ValueError(f"{self.source}: {exc}") from exc
        if not isinstance(rendered, list) or not all(
            isinstance(c, dict) and c.get("name") and c.get("image") for c in rendered
        ):
            raise ValueError(
                f"{self.source}: must be a YAML list of containers with names and images"
            )
        return rendered


def init_container(
    job: PyTorchJob,
    *,
    image: str,
    max_tries: int,
    check: str = CHECK_TCP,
) -> dict[str, Any] | None:
    """The init container for the Worker pods of ``job``; None when workers wait for nobody
    (no Master: an elastic job's workers rendezvous among themselves)."""
    if PyTorchReplicaType.MASTER not in job.spec.pytorch_replica_specs:
        return None
    return wait_for_replica(
        job,
        rtype=PyTorchReplicaType.MASTER,
        port=pytorch_port(job, PyTorchReplicaType.MASTER),
        name=INIT_CONTAINER_NAME,
        image=image,
        max_tries=max_tries,
        check=check,
        script=None if check == CHECK_DNS else WAIT_FOR_MASTER_SCRIPT,
    )


def add_init_container(
    job: PyTorchJob,
    template: dict[str, Any],
    *,
    rtype: str,
    image: str,
    max_tries: int,
    check: str = CHECK_TCP,
    file_template: InitContainerTemplate | None = None,
) -> None:
    """Append the init container (or the template file's) to a Worker pod template, after
    the user's own, which may stage data first; containers whose names the template already
    has are kept as the user wrote them."""
    if rtype != PyTorchReplicaType.WORKER:
        return
    if PyTorchReplicaType.MASTER not in job.spec.pytorch_replica_specs:
        return
    if file_template is not None:
        containers = file_template.render(
            master_addr=replica_name(job_name=job.name, rtype=PyTorchReplicaType.MASTER, index=0),
            master_port=pytorch_port(job, PyTorchReplicaType.MASTER),
            image=image,
            max_tries=max_tries,
        )
    else:
        built = init_container(job, image=image, max_tries=max_tries, check=check)
        containers = [built] if built is not None else []
    add_init_containers(template, containers)
