"""`REAL=1 make demo` (or `make demo-real`): real distributed training on the local cluster.

1. Start the local cluster with one real node (kubelet, containerd) beside the kwok nodes, with
   the images of jobcontroller.testing.images imported (built from Debian packages the first
   time; cached after).
2. Deploy the default install (the all-in-one training-operator, every kind in one process) as
   a Deployment on the real node, from the manifests (manifests/overlays/local-real-node), and
   wait for it to roll out.
3. Run examples/real/pytorchjob-ddp.yaml (PyTorch DDP, Master + 2 Workers) and
   examples/real/mpijob-allreduce.yaml (mpirun over SSH, mpi4py) to completion, then print their
   training logs and the final table.
4. Tear everything down unless KEEP=1 (then `make cluster-down CLUSTER_DIR=.cluster-real`).
Exit 1 if a job did not succeed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from jobcontroller.testing.__main__ import node_images
from jobcontroller.testing.controlplane import ControlPlane

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "tests" / "conformance" / "scripts"
NAMESPACE = "demo-real"
KEEP = os.environ.get("KEEP") == "1"
JOBS = (("pytorchjob", "ddp", "pytorch"), ("mpijob", "pi", "mpi"))


def say(msg: str) -> None:
    print(f"\n=== {msg}", flush=True)


def main() -> int:
    started = time.monotonic()
    say("building (or reusing) the real node's images")
    images = node_images()
    workdir = ROOT / ".cluster-real"
    plane = ControlPlane(
        controller_manager=True,
        scheduler=True,
        kwok=True,
        nodes=2,
        workdir=workdir,
        real_node=True,
        node_images=images,
        die_with_parent=not KEEP,
    )
    say("starting the cluster with a real node")
    plane.start()
    assert plane.binaries is not None
    kubectl_bin = plane.binaries["kubectl"]

    def kubectl(*args: str, check: bool = True) -> str:
        out = subprocess.run(
            [kubectl_bin, f"--kubeconfig={plane.kubeconfig}", *args],
            check=False,
            capture_output=True,
            text=True,
        )
        if check and out.returncode != 0:
            raise SystemExit(f"kubectl {' '.join(args)} failed:\n{out.stdout}{out.stderr}")
        return out.stdout

    ok = False
    try:
        print(kubectl("get", "nodes", "-o", "wide"))
        say("deploying the training-operator from manifests/overlays/local-real-node")
        overlay = str(ROOT / "manifests/overlays/local-real-node")
        # The first apply creates the CRDs; the install's ClusterTrainingRuntimes are taken by a
        # second one, once their CRD is established (README, "Deploying to a real cluster").
        kubectl("apply", "--server-side", "-k", overlay, check=False)
        kubectl(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/clustertrainingruntimes.trainer.kubeflow.org",
        )
        kubectl("apply", "--server-side", "-k", overlay)
        kubectl(
            "-n", "kubeflow", "rollout", "status", "deployment/training-operator", "--timeout=240s"
        )
        print(kubectl("-n", "kubeflow", "get", "pods", "-o", "wide"))
        say("submitting a PyTorchJob (DDP) and an MPIJob (mpirun over SSH)")
        kubectl("create", "namespace", NAMESPACE)
        for _ in range(100):  # pods need the namespace's default ServiceAccount
            if kubectl("-n", NAMESPACE, "get", "serviceaccount", "default", check=False):
                break
            time.sleep(0.2)
        kubectl(
            "-n",
            NAMESPACE,
            "create",
            "configmap",
            "scripts",
            f"--from-file={SCRIPTS / 'ddp.py'}",
            f"--from-file={SCRIPTS / 'allreduce_mpi.py'}",
        )
        for f in ("pytorchjob-ddp.yaml", "mpijob-allreduce.yaml"):
            kubectl("-n", NAMESPACE, "apply", "-f", str(ROOT / "examples" / "real" / f))
        results = {}
        for kind, name, _ in JOBS:
            out = subprocess.run(
                [
                    kubectl_bin,
                    f"--kubeconfig={plane.kubeconfig}",
                    "-n",
                    NAMESPACE,
                    "wait",
                    f"{kind}/{name}",
                    "--for=condition=Succeeded",
                    "--timeout=600s",
                ],
                capture_output=True,
                text=True,
            )
            results[name] = out.returncode == 0
        for kind, name, container in JOBS:
            say(f"{kind} {name}: training logs")
            print(
                kubectl(
                    "-n",
                    NAMESPACE,
                    "logs",
                    f"-l=training.kubeflow.org/job-name={name}",
                    f"-c={container}",
                    "--prefix",
                    "--tail=20",
                    check=False,
                )
            )
        say("final state")
        print(kubectl("-n", NAMESPACE, "get", "pytorchjobs,mpijobs", check=False))
        print(kubectl("-n", NAMESPACE, "get", "pods", "-o", "wide", check=False))
        ok = all(results.values())
        say(
            f"{'all jobs succeeded' if ok else f'NOT all jobs succeeded: {results}'} "
            f"({time.monotonic() - started:.0f}s)"
        )
    finally:
        if KEEP:
            print(f"cluster kept: KUBECONFIG={plane.kubeconfig}")
        else:
            plane.stop()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
