"""Init containers that hold a replica's pod until another replica is reachable.

A process that connects to a peer at start-up (torch.distributed's ``init_process_group``, an
MPI launcher's ssh) crashes when the peer's name does not resolve yet or its port is not open.
An init container that waits for the peer keeps the pod from starting its training container
until then. The TCP check loops on ``nc -z -w 2 <host> <port>``: ``nc`` resolves the short
name through the C library with the search path the training process will use, and succeeds
only once the port accepts a connection, so "resolves" and "listens" are checked together
(``nslookup`` alone is not enough: a name can resolve seconds before its port opens, and
busybox's mishandles the search path). The DNS check waits for the name only, for meshes where
an init container cannot open TCP connections. Any image with a shell, ``seq``, ``grep`` and an
``nc`` that knows ``-z`` works (busybox, alpine); the script checks ``-z`` first and exits at
once with a message rather than waiting in vain.

The peer's address, port and the attempt limit go in as environment variables (``MASTER_ADDR``,
``MASTER_PORT``, ``MAX_TRIES``: the rendezvous convention), so the script itself is a constant.
``MAX_TRIES`` 0 means no limit: the job's ``activeDeadlineSeconds`` bounds the wait.
"""

from __future__ import annotations

from typing import Any

from jobcontroller.api.common import JobModel
from jobcontroller.core.names import replica_name

__all__ = [
    "CHECK_DNS",
    "CHECK_TCP",
    "WAIT_FOR_MASTER_DNS_SCRIPT",
    "WAIT_FOR_MASTER_SCRIPT",
    "add_init_containers",
    "tcp_wait_script",
    "wait_for_replica",
]

CHECK_TCP = "tcp"
CHECK_DNS = "dns"

# Attempt $i of $MAX_TRIES (0: no limit); "$i/$MAX_TRIES" in messages only when limited.
_LOOP = """\
i=0
while [ "$MAX_TRIES" -eq 0 ] || [ "$i" -lt "$MAX_TRIES" ]; do
  i=$((i + 1))
  if {check}; then
    echo "master $MASTER_ADDR{what} {ok}"
    exit 0
  fi
  if [ "$MAX_TRIES" -eq 0 ]; then n="$i"; else n="$i/$MAX_TRIES"; fi
  echo "waiting for master $MASTER_ADDR{what} ($n)"
  sleep 2
done
echo "master $MASTER_ADDR{what} not {ok_short} after $MAX_TRIES tries"
exit 1
"""


def tcp_wait_script(*, image_hint: str = "choose another image") -> str:
    """The TCP check's script; ``image_hint`` ends the message of an image whose ``nc`` has
    no ``-z`` (the flag that sets the image, where there is one)."""
    return f"""\
if nc -z -w 1 127.0.0.1 1 2>&1 | grep -q "invalid option"; then
  echo "this image's nc has no -z option; {image_hint}"
  exit 2
fi
""" + _LOOP.format(
        check='nc -z -w 2 "$MASTER_ADDR" "$MASTER_PORT"',
        what=":$MASTER_PORT",
        ok="accepts connections",
        ok_short="reachable",
    )


WAIT_FOR_MASTER_SCRIPT = tcp_wait_script()

WAIT_FOR_MASTER_DNS_SCRIPT = _LOOP.format(
    check='nslookup "$MASTER_ADDR" >/dev/null 2>&1',
    what="",
    ok="resolves",
    ok_short="resolved",
)


def wait_for_replica(
    job: JobModel[Any],
    *,
    rtype: str,
    index: int = 0,
    port: int,
    name: str,
    image: str,
    max_tries: int = 0,
    check: str = CHECK_TCP,
    script: str | None = None,
) -> dict[str, Any]:
    """An init container named ``name`` that waits until replica ``rtype``/``index`` of
    ``job`` accepts connections on ``port`` (``check`` tcp) or its name resolves (dns);
    ``script`` replaces the check's own (a TCP script whose hint names a framework's flag)."""
    if script is None:
        script = WAIT_FOR_MASTER_DNS_SCRIPT if check == CHECK_DNS else WAIT_FOR_MASTER_SCRIPT
    address = replica_name(job_name=job.name, rtype=rtype, index=index)
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", "-c", script],
        "env": [
            {"name": "MASTER_ADDR", "value": address},
            {"name": "MASTER_PORT", "value": str(port)},
            {"name": "MAX_TRIES", "value": str(max_tries)},
        ],
        "resources": {
            "limits": {"cpu": "100m", "memory": "20Mi"},
            "requests": {"cpu": "50m", "memory": "10Mi"},
        },
    }


def add_init_containers(template: dict[str, Any], containers: list[dict[str, Any]]) -> None:
    """Append ``containers`` to a pod template's init containers, after the user's own (which
    may stage data first); a name the template already has keeps the user's container."""
    spec = template.setdefault("spec", {})
    current = spec.setdefault("initContainers", [])
    names = {c.get("name") for c in current if isinstance(c, dict)}
    current.extend(c for c in containers if c.get("name") not in names)
