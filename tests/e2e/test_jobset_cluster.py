"""`make cluster-up JOBSET=1` as a user drives it: the cluster comes up with the JobSet
controller, a JobSet applied with kubectl completes on simulated pods, and `cluster-down`
leaves no JobSet process behind."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from test_local_cluster import _wait_gone

from jobcontroller.testing.binaries import find_binaries

JOBSET_YAML = """
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: hello
spec:
  replicatedJobs:
    - name: workers
      replicas: 2
      template:
        spec:
          parallelism: 2
          completions: 2
          template:
            metadata:
              annotations:
                sim.jobcontroller/exit-code: "0"
                sim.jobcontroller/run-for: 1s
            spec:
              containers:
                - name: main
                  image: busybox
"""


def test_cluster_up_with_jobset_runs_a_jobset_applied_with_kubectl(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    cmd = [sys.executable, "-m", "jobcontroller.testing"]
    up = subprocess.run(
        [*cmd, "up", "--dir", str(directory), "--jobset"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert up.returncode == 0, up.stdout + up.stderr
    pids = [
        int(line.split("pid ")[1].split(",")[0])
        for line in up.stdout.splitlines()
        if " pid " in line
    ]
    jobset_lines = [line for line in up.stdout.splitlines() if line.startswith("jobset v")]
    assert len(jobset_lines) == 1, up.stdout
    assert len(pids) == 6, up.stdout  # the five components and JobSet's controller
    kubectl = [find_binaries()["kubectl"], "--kubeconfig", str(directory / "kubeconfig")]
    try:
        applied = subprocess.run(
            [*kubectl, "apply", "-f", "-"],
            input=JOBSET_YAML,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert applied.returncode == 0, applied.stderr
        waited = subprocess.run(
            [*kubectl, "wait", "--for=condition=Completed", "jobset/hello", "--timeout=90s"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        shown = subprocess.run(
            [*kubectl, "get", "jobset/hello", "-o", "yaml"], capture_output=True, text=True
        )
        assert waited.returncode == 0, waited.stderr + shown.stdout
        jobs = subprocess.run(
            [*kubectl, "get", "jobs", "--no-headers", "-o", "custom-columns=N:.metadata.name"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert jobs.stdout.split() == ["hello-workers-0", "hello-workers-1"]
    finally:
        down = subprocess.run(
            [*cmd, "down", "--dir", str(directory)], capture_output=True, text=True, timeout=120
        )
    assert down.returncode == 0, down.stderr
    assert _wait_gone(pids) == []
