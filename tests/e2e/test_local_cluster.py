"""The local cluster as a newcomer uses it: `make cluster-up`, kubectl, `make cluster-down`.

Also: a ControlPlane leaves no process and no directory behind, whether stopped normally,
left by an exception, or orphaned by a killed parent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[2]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers signal 0; it is gone for our purposes.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


def _wait_gone(pids: list[int], timeout: float = 20) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_cluster_up_get_nodes_down(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    cmd = [sys.executable, "-m", "jobcontroller.testing"]
    up = subprocess.run(
        [*cmd, "up", "--dir", str(directory)], capture_output=True, text=True, timeout=300
    )
    assert up.returncode == 0, up.stdout + up.stderr
    pids = [int(line.split("pid")[1]) for line in up.stdout.splitlines() if " pid " in line]
    supervisor = int((directory / "supervisor.pid").read_text())
    assert len(pids) == 5, up.stdout  # etcd, apiserver, controller-manager, scheduler, kwok
    try:
        kubectl = find_binaries()["kubectl"]
        nodes = subprocess.run(
            [
                kubectl,
                "--kubeconfig",
                str(directory / "kubeconfig"),
                "get",
                "nodes",
                "--no-headers",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert nodes.returncode == 0, nodes.stderr
        rows = [line.split() for line in nodes.stdout.splitlines()]
        assert [r[0] for r in rows] == [f"kwok-node-{i}" for i in range(4)]
        assert {r[1] for r in rows} == {"Ready"}
    finally:
        down = subprocess.run(
            [*cmd, "down", "--dir", str(directory)], capture_output=True, text=True, timeout=120
        )
    assert down.returncode == 0, down.stderr
    assert _wait_gone([*pids, supervisor]) == []
    assert not directory.exists()


def test_control_plane_cleans_up_after_an_exception() -> None:
    cp = ControlPlane()
    with pytest.raises(RuntimeError, match="boom"), cp:
        pids = list(cp.pids().values())
        workdir = cp.workdir
        assert workdir is not None and workdir.exists()
        raise RuntimeError("boom")
    assert _wait_gone(pids) == []
    assert not workdir.exists()


def test_components_die_with_a_killed_parent(tmp_path: Path) -> None:
    """SIGKILL leaves no chance to clean up; PR_SET_PDEATHSIG takes the components along."""
    script = textwrap.dedent(
        """
        import sys, time
        from jobcontroller.testing.controlplane import ControlPlane
        cp = ControlPlane()
        cp.start()
        print(" ".join(str(p) for p in cp.pids().values()), flush=True)
        time.sleep(600)
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    pids = [int(p) for p in line.split()]
    assert len(pids) == 2, line
    leftovers = [
        *Path("/dev/shm").glob(f"jobcontroller-etcd-{proc.pid}-*"),
        *Path(tempfile.gettempdir()).glob(f"jobcontroller-cp-{proc.pid}-*"),
    ]
    assert leftovers, "the child should have made its state directories"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _wait_gone(pids) == []
    # The next control plane to start removes what the killed one left behind.
    with ControlPlane():
        pass
    assert [d for d in leftovers if d.exists()] == []
