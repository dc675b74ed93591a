"""An operator as a separate process, as a Deployment runs it, for tests that must kill it.

``OperatorProcess`` starts an operator's console script with the Deployment's flags (or any
others), optionally inside a memory cgroup holding it to the Deployment's limit, and offers
what a fault test needs: SIGKILL, SIGSTOP/SIGCONT, SIGTERM with the kubelet's grace period,
its readiness and metrics, its peak memory, and whether the kernel OOM-killed it.

The memory limit is real where the host lets us create a cgroup (v1 ``memory`` or v2 with the
``memory`` controller; root is needed): the child joins it before ``exec``, so the limit
applies from its first byte. Where no cgroup can be made the process runs unconfined and
:attr:`OperatorProcess.enforced` is False; its peak RSS is still measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from jobcontroller.testing.ports import free_port

__all__ = ["MemoryCgroup", "OperatorProcess", "parse_quantity_bytes"]

_V1_ROOT = Path("/sys/fs/cgroup/memory")
_V2_ROOT = Path("/sys/fs/cgroup")


def parse_quantity_bytes(text: str) -> int:
    """``512Mi`` -> 536870912 (the binary and decimal suffixes a memory limit uses)."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "K": 10**3, "M": 10**6, "G": 10**9}
    for suffix, factor in units.items():
        if text.endswith(suffix):
            return int(float(text[: -len(suffix)]) * factor)
    return int(text)


@dataclass
class MemoryCgroup:
    """A memory cgroup of our own with a hard limit, or None from :meth:`create` when the host
    has none to give."""

    path: Path
    v2: bool

    @classmethod
    def create(cls, limit_bytes: int) -> MemoryCgroup | None:
        name = f"jobcontroller-test-{uuid.uuid4().hex[:8]}"
        if (_V1_ROOT / "memory.limit_in_bytes").exists():
            candidates = [(_V1_ROOT / name, False)]
        elif (_V2_ROOT / "cgroup.controllers").exists():
            candidates = [(_V2_ROOT / name, True)]
        else:
            return None
        for path, v2 in candidates:
            try:
                path.mkdir()
                limit_file = "memory.max" if v2 else "memory.limit_in_bytes"
                (path / limit_file).write_text(str(limit_bytes))
                if not v2:
                    with contextlib.suppress(OSError):  # no swap accounting on this kernel
                        (path / "memory.memsw.limit_in_bytes").write_text(str(limit_bytes))
            except OSError:
                with contextlib.suppress(OSError):
                    path.rmdir()
                continue
            return cls(path=path, v2=v2)
        return None

    def join(self) -> None:
        """Move the calling process into the cgroup (run in the child before exec)."""
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    @property
    def peak_bytes(self) -> int:
        name = "memory.peak" if self.v2 else "memory.max_usage_in_bytes"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return 0

    @property
    def oom_kills(self) -> int:
        """Processes the kernel killed for this cgroup's limit."""
        name = "memory.events" if self.v2 else "memory.oom_control"
        try:
            text = (self.path / name).read_text()
        except OSError:
            return 0
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return 0

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            self.path.rmdir()


@dataclass
class OperatorProcess:
    """One operator process. ``script`` is its console script (``tf-operator``...)."""

    script: str
    kubeconfig: Path
    log: Path
    args: list[str] = field(default_factory=list)
    memory_limit: int | None = None
    """Bytes; enforced through a cgroup where the host allows (see :attr:`enforced`)."""
    metrics_port: int = 0
    health_port: int = 0
    popen: subprocess.Popen[bytes] | None = None
    cgroup: MemoryCgroup | None = None
    stopped: bool = False
    """Set by :meth:`close` and by a test that stops the process for good (no restart)."""
    peak_rss: int = 0
    """The largest VmHWM read so far (bytes); :meth:`sample` updates it."""
    starts: int = 0
    state_dir: Path | None = None
    """The crash-loop guard's ``--state-dir``; None: next to the log, kept across restarts
    of this process as a Deployment's emptyDir is across its container's."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to the process's environment (test hooks)."""

    @property
    def enforced(self) -> bool:
        return self.cgroup is not None

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def argv(self) -> list[str]:
        return [
            str(Path(sys.executable).parent / self.script),
            f"--kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--metrics-port={self.metrics_port}",
            f"--health-port={self.health_port}",
            "--log-format=json",
            f"--state-dir={self.state_dir or self.log.with_suffix('.state')}",
            *self.args,
        ]

    def start(self) -> None:
        """Start (or start again, as a Deployment's restart would) with fresh ports."""
        assert self.popen is None or self.popen.poll() is not None, "still running"
        self.metrics_port, self.health_port = free_port(), free_port()
        if self.memory_limit is not None and self.cgroup is None:
            self.cgroup = MemoryCgroup.create(self.memory_limit)
        cgroup = self.cgroup
        self.starts += 1
        with self.log.open("ab") as out:
            out.write(f"\n===== start {self.starts}: {' '.join(self.argv())}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                self.argv(),
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=cgroup.join if cgroup is not None else None,
                env={**os.environ, **self.env} if self.env else None,
            )

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.alive:
            assert self.popen is not None
            self.sample()
            self.popen.send_signal(sig)

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.popen is None:
            return
        self.signal(signal.SIGKILL)
        self.popen.wait()

    async def terminate(self, *, grace: float = 30.0) -> int | None:
        """What the kubelet does: SIGTERM, then SIGKILL after ``grace`` seconds. The exit
        status if the process ended by itself within the grace period, else None."""
        assert self.popen is not None
        self.signal(signal.SIGTERM)
        try:
            return await asyncio.to_thread(self.popen.wait, grace)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def sample(self) -> int:
        """Read the process's peak RSS (VmHWM) into :attr:`peak_rss`; returns it."""
        if self.alive:
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        self.peak_rss = max(self.peak_rss, int(line.split()[1]) * 1024)
        return self.peak_rss

    def rss(self) -> int:
        """The process's resident memory now (VmRSS, bytes); 0 when it is not running."""
        if self.alive:
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        return int(line.split()[1]) * 1024
        return 0

    def readiness(self) -> dict[str, object] | None:
        """/readyz's JSON (``leader``, ``synced``...), or None when it does not answer."""
        url = f"http://127.0.0.1:{self.health_port}/readyz"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                result: dict[str, object] = json.loads(response.read())
                return result
        except (OSError, ValueError):
            return None

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            return str(response.read().decode())

    async def wait_leading(self, *, timeout: float = 60.0) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while loop.time() < deadline:
            if not self.alive:
                raise AssertionError(f"{self.script} exited:\n{self.tail()}")
            ready = self.readiness()
            if ready is not None and ready.get("leader"):
                return
            await asyncio.sleep(0.2)
        raise AssertionError(f"{self.script} never led within {timeout:g}s:\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def close(self) -> None:
        self.stopped = True
        self.kill()
        if self.cgroup is not None:
            self.cgroup.remove()
            self.cgroup = None
