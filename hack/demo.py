"""`make demo`: the default install running the seed and example jobs of every framework, and a
Kubeflow Trainer v2 TrainJob beside them, on a local cluster, end to end.

1. Start the local cluster (etcd, kube-apiserver, controller-manager, scheduler, kwok nodes) with
   the JobSet controller (v0.12.0), which runs a TrainJob's JobSet.
2. Install the CRDs, namespace and RBAC of the default install (manifests/base) (the Deployment
   and Service are left out: their image cannot run on simulated nodes), then the runtimes it
   ships (manifests/runtimes), once their CRD is Established, as docs/trainjob.md does.
3. Run its Deployment, the all-in-one training-operator (every kind in one process, TrainJob
   included), as a local process with the Deployment's command line, authenticated as its
   ServiceAccount (a bound token), so the demo also proves the RBAC is enough: it counts the
   calls the API server refused it (403) and fails on any.
4. Submit the seed jobs and upstream's TrainJob example (examples/yaml/01-multi-node.yaml on
   torch-distributed) with simulation annotations (every pod exits 0 after a few seconds; the
   TrainJob's through a runtime patch), show a live table until all are done, then the final
   table, the events of one job and a few lines of the operator's /metrics.
5. Tear everything down unless KEEP=1. Exit 1 if any job missed its expected state, or if the
   operator was refused a call.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from jobcontroller.runtime.kube import NAMESPACES, ApiError, KubeApi, Resource
from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.deployments import (
    LocalCommand,
    deployment_command,
    render_kustomize,
    token_kubeconfig,
)
from jobcontroller.testing.pods import simulate

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / ".cluster"
NAMESPACE = "demo"
TIMEOUT = 240.0
KEEP = os.environ.get("KEEP") == "1"

KINDS = {
    "TFJob": Resource("kubeflow.org", "v1", "TFJob", "tfjobs"),
    "PyTorchJob": Resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs"),
    "MPIJob": Resource("kubeflow.org", "v2beta1", "MPIJob", "mpijobs"),
    "XGBoostJob": Resource("kubeflow.org", "v1", "XGBoostJob", "xgboostjobs"),
    "PaddleJob": Resource("kubeflow.org", "v1", "PaddleJob", "paddlejobs"),
    "JAXJob": Resource("kubeflow.org", "v1", "JAXJob", "jaxjobs"),
    "TrainJob": Resource("trainer.kubeflow.org", "v1alpha1", "TrainJob", "trainjobs"),
}
#: A kind's final states: the v1 kinds' and Kubeflow Trainer v2's words.
DONE = {"Succeeded": "Succeeded", "Complete": "Succeeded", "Failed": "Failed"}
SPEC_KEYS = {
    "TFJob": "tfReplicaSpecs",
    "PyTorchJob": "pytorchReplicaSpecs",
    "MPIJob": "mpiReplicaSpecs",
    "XGBoostJob": "xgbReplicaSpecs",
    "PaddleJob": "paddleReplicaSpecs",
    "JAXJob": "jaxReplicaSpecs",
}
JOB_FILES = [
    ROOT / "examples" / "tfjob-ps-worker.yaml",
    ROOT / "examples" / "tfjob-multi-worker.yaml",
    ROOT / "examples" / "pytorchjob-mnist.yaml",
    ROOT / "examples" / "mpijob-horovod.yaml",
    ROOT / "examples" / "xgboostjob-iris.yaml",
    ROOT / "examples" / "paddlejob-simple-cpu.yaml",
    ROOT / "examples" / "jaxjob-simple.yaml",
]
#: Kubeflow Trainer v2.3.0's own TrainJob example, unchanged but for the simulation patch.
TRAINJOB_FILE = ROOT / "tests" / "data" / "trainer-v2.3.0" / "examples" / "01-multi-node.yaml"


def kubectl(*args: str, stdin: str | None = None) -> str:
    cmd = [find_binaries()["kubectl"], "--kubeconfig", str(CLUSTER / "kubeconfig"), *args]
    out = subprocess.run(cmd, input=stdin, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed:\n{out.stderr}")
    return out.stdout


def step(message: str) -> None:
    print(f"\n==> {message}", flush=True)


def cluster_up() -> None:
    step(
        "starting the local cluster (etcd, apiserver, controller-manager, scheduler, kwok, "
        "JobSet's controller)"
    )
    cmd = [sys.executable, "-m", "jobcontroller.testing", "up", "--dir", str(CLUSTER)]
    subprocess.run([*cmd, "--jobset"], check=True)
    if "jobset" not in (CLUSTER / "ready").read_text():
        # A cluster kept by an earlier `KEEP=1` run without JobSet's controller: start anew.
        subprocess.run([*cmd[:3], "down", "--dir", str(CLUSTER)], check=True)
        subprocess.run([*cmd, "--jobset"], check=True)


def rendered_manifests() -> list[dict[str, Any]]:
    return render_kustomize(find_binaries()["kubectl"], ROOT / "manifests" / "base")


def install(docs: list[dict[str, Any]]) -> None:
    step("installing the CRDs, the kubeflow namespace and RBAC from manifests/")
    wanted = [d for d in docs if d["kind"] not in ("Deployment", "Service")]
    print(kubectl("apply", "--server-side", "-f", "-", stdin=yaml.safe_dump_all(wanted)), end="")
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    step("installing the TrainJob runtimes from manifests/runtimes")
    runtimes = str(ROOT / "manifests" / "runtimes")
    print(kubectl("apply", "--server-side", "--force-conflicts", "-k", runtimes), end="")


def start_operators(
    commands: dict[str, LocalCommand],
) -> dict[str, subprocess.Popen[bytes]]:
    step("starting the operators with their Deployments' command lines")
    logs = CLUSTER / "logs"
    logs.mkdir(exist_ok=True)
    procs = {}
    for name, command in commands.items():
        argv = command.argv
        print("  " + " ".join(Path(argv[0]).name if i == 0 else a for i, a in enumerate(argv)))
        out = (logs / f"{name}.log").open("ab")
        procs[name] = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    (CLUSTER / "operators.pids").write_text("\n".join(str(p.pid) for p in procs.values()))
    ports = {n: {"metrics": c.metrics_port, "health": c.health_port} for n, c in commands.items()}
    (CLUSTER / "operators.json").write_text(json.dumps(ports))
    deadline = time.monotonic() + 60
    for name, command in commands.items():
        health = command.health_port
        while True:
            if procs[name].poll() is not None:
                raise SystemExit(f"{name} exited; see {name}.log (logs are kept on failure)")
            url = f"http://127.0.0.1:{health}/readyz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200 and json.loads(r.read()).get("leader"):
                    break
            if time.monotonic() > deadline:
                raise SystemExit(f"{name} not ready; see {name}.log (logs are kept on failure)")
            time.sleep(0.3)
        print(f"  {name}: ready and leading")
    return procs


def forbidden_calls(metrics_port: int) -> dict[str, float]:
    """The operator's API calls refused for want of a permission (403), by series."""
    url = f"http://127.0.0.1:{metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as r:
        lines = r.read().decode().splitlines()
    return {
        series: float(value)
        for series, _, value in (ln.rpartition(" ") for ln in lines)
        if series.startswith("jobcontroller_api_requests_total") and 'code="403"' in series
    }


def stop_operators() -> None:
    """SIGTERM the operators a run started (a kept one too) and wait until they are gone: they
    release their Leases on the way out, so the next operators lead at once."""
    pids = CLUSTER / "operators.pids"
    if not pids.exists():
        return
    groups = [int(text) for text in pids.read_text().split()]
    for pid in groups:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + 40
    for pid in groups:
        while time.monotonic() < deadline:
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.2)
    pids.unlink()


async def clear_previous_run(kube: KubeApi, jobs: list[dict[str, Any]]) -> None:
    """A cluster kept by `KEEP=1` still holds the last run's jobs: delete them first."""
    gone = []
    for job in jobs:
        resource, name = KINDS[job["kind"]], job["metadata"]["name"]
        try:
            await kube.delete(resource, name, namespace=NAMESPACE)
        except ApiError as exc:
            if not exc.is_not_found:
                raise
            continue
        gone.append((resource, name))
    if gone:
        step(f"deleted {len(gone)} jobs left by the previous run")
    deadline = time.monotonic() + 60
    for resource, name in gone:
        while time.monotonic() < deadline:
            try:
                await kube.get(resource, name, namespace=NAMESPACE)
            except ApiError as exc:
                if exc.is_not_found:
                    break
                raise
            await asyncio.sleep(0.3)


def load_jobs() -> list[dict[str, Any]]:
    jobs = []
    for path in JOB_FILES:
        for doc in yaml.safe_load_all(path.read_text()):
            if not doc:
                continue
            job = copy.deepcopy(doc)
            job["metadata"].pop("namespace", None)  # v1.9's examples name theirs
            for spec in job["spec"][SPEC_KEYS[job["kind"]]].values():
                simulate(spec.setdefault("template", {}), 0, run_for="4s")
            jobs.append(job)
    [trainjob] = [d for d in yaml.safe_load_all(TRAINJOB_FILE.read_text()) if d]
    pod = simulate({}, 0, run_for="4s")
    node = {"name": "node", "template": {"spec": {"template": pod}}}
    trainjob["spec"]["runtimePatches"] = [
        {
            "manager": "sim.jobcontroller/kwok",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [node]}}},
        }
    ]
    jobs.append(trainjob)
    return jobs


def state(job: dict[str, Any]) -> str:
    conds = [c for c in job.get("status", {}).get("conditions", []) if c.get("status") == "True"]
    return conds[-1]["type"] if conds else "Pending"


def table(jobs: list[dict[str, Any]]) -> str:
    rows = [("KIND", "NAME", "STATE", "ACTIVE", "SUCCEEDED", "FAILED")]
    for job in jobs:
        status = job.get("status", {})
        # A v1 job counts pods by replica type; a TrainJob counts its JobSet's Jobs.
        counts = status.get("replicaStatuses", {}).values() or status.get("jobsStatus", [])
        rows.append(
            (
                job["kind"],
                job["metadata"]["name"],
                state(job),
                str(sum(c.get("active", 0) for c in counts)),
                str(sum(c.get("succeeded", 0) for c in counts)),
                str(sum(c.get("failed", 0) for c in counts)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows
    )


async def follow(kube: KubeApi, submitted: list[dict[str, Any]]) -> list[dict[str, Any]]:
    step(f"jobs in namespace {NAMESPACE} (refreshing until all are done)")
    deadline = time.monotonic() + TIMEOUT
    tty = sys.stdout.isatty()
    last = ""
    while True:
        current = []
        for job in submitted:
            try:
                current.append(
                    await kube.get(KINDS[job["kind"]], job["metadata"]["name"], namespace=NAMESPACE)
                )
            except ApiError:
                current.append(job)
        text = table(current)
        if text != last:
            if tty and last:
                print(f"\x1b[{last.count(chr(10)) + 1}F\x1b[J", end="")
            print(text, flush=True)
            last = text
        if all(state(j) in DONE for j in current) or time.monotonic() > deadline:
            return current
        await asyncio.sleep(1)


async def demo() -> int:
    cluster_up()
    stop_operators()  # those of a run kept with KEEP=1, which still hold the Leases
    docs = rendered_manifests()
    install(docs)
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    started = time.monotonic()
    async with await KubeApi.from_config(kubeconfig=str(CLUSTER / "kubeconfig")) as kube:
        commands = {}
        for name, dep in deployments.items():
            sa = dep["spec"]["template"]["spec"]["serviceAccountName"]
            kc = await token_kubeconfig(
                kube,
                admin_kubeconfig=CLUSTER / "kubeconfig",
                service_account=sa,
                namespace=dep["metadata"]["namespace"],
                out=CLUSTER / f"kubeconfig-{sa}",
            )
            commands[name] = deployment_command(dep, kubeconfig=kc)
        start_operators(commands)
        # RBAC reaches the authorizer through its informers: judge only the calls made once
        # the operators lead, as the e2e tests do.
        refused_before = {n: forbidden_calls(c.metrics_port) for n, c in commands.items()}
        with contextlib.suppress(ApiError):
            await kube.create(NAMESPACES, {"metadata": {"name": NAMESPACE}})
        jobs = load_jobs()
        await clear_previous_run(kube, jobs)
        step(
            "submitting the seed jobs and a TrainJob "
            "(with simulation annotations: every pod exits 0 after 4s)"
        )
        for job in jobs:
            await kube.create(KINDS[job["kind"]], job, namespace=NAMESPACE)
            print(f"  {job['kind']}/{job['metadata']['name']} created")
        final = await follow(kube, jobs)
        step(f"final state after {time.monotonic() - started:.0f}s")
        print(table(final))
        first = final[0]["metadata"]["name"]
        step(f"events of tfjob/{first}")
        print(
            kubectl(
                "get",
                "events",
                "-n",
                NAMESPACE,
                "--field-selector",
                f"involvedObject.name={first}",
                "--sort-by=.lastTimestamp",
            ),
            end="",
        )
        step("a few lines of the operator's /metrics")
        forbidden = []
        for name, command in commands.items():
            metrics_port = command.metrics_port
            url = f"http://127.0.0.1:{metrics_port}/metrics"
            with urllib.request.urlopen(url, timeout=5) as r:
                lines = [
                    ln
                    for ln in r.read().decode().splitlines()
                    if ln.startswith("training_operator_jobs")
                ]
            print(f"  [{name}]")
            for ln in lines:
                print(f"    {ln}")
            before = refused_before[name]
            forbidden += [
                f"{name}: {series} +{count - before.get(series, 0):g}"
                for series, count in forbidden_calls(metrics_port).items()
                if count > before.get(series, 0)
            ]
    print(f"\ncalls refused for want of a permission (403): {len(forbidden)} series")
    for ln in forbidden:
        print(f"  {ln}")
    missed = [j["metadata"]["name"] for j in final if DONE.get(state(j)) != "Succeeded"]
    if missed:
        print(f"\nFAILED: not Succeeded (or Complete): {', '.join(missed)}")
        return 1
    if forbidden:
        print("\nFAILED: the operator was refused calls its RBAC should allow")
        return 1
    v2 = [j for j in final if j["kind"] == "TrainJob"]
    print(
        f"\nall {len(final) - len(v2)} v1 jobs Succeeded and {len(v2)} TrainJob Complete, "
        "served by one training-operator"
    )
    return 0


def kept_message() -> str:
    """How to reach what KEEP=1 leaves running."""
    lines = [
        "",
        "KEEP=1: the cluster and the operators are left running. To use them:",
        f"  export KUBECONFIG={CLUSTER / 'kubeconfig'} PATH={CLUSTER / 'bin'}:$PATH",
        "  kubectl get tfjobs,pytorchjobs,mpijobs,trainjobs,jobsets -n demo",
    ]
    with contextlib.suppress(OSError, KeyError, ValueError):
        for name, ports in json.loads((CLUSTER / "operators.json").read_text()).items():
            lines.append(
                f"  {name}: metrics http://127.0.0.1:{ports['metrics']}/metrics, "
                f"health http://127.0.0.1:{ports['health']}/readyz, "
                f"log {CLUSTER / 'logs' / (name + '.log')}"
            )
    lines.append("`make cluster-down` stops everything; `make demo` again reuses the cluster.")
    return "\n".join(lines)


def keep_logs() -> None:
    """Copy the operators' logs out of the cluster directory before it is removed."""
    logs = CLUSTER / "logs"
    if logs.is_dir():
        kept = ROOT / ".demo-logs"
        shutil.rmtree(kept, ignore_errors=True)
        shutil.copytree(logs, kept)
        print(f"operator logs kept in {kept}")


def main() -> int:
    status = 1
    try:
        status = asyncio.run(demo())
        return status
    finally:
        if KEEP:
            print(kept_message())
        else:
            step("tearing down")
            stop_operators()
            if status != 0:
                keep_logs()
            subprocess.run(
                [sys.executable, "-m", "jobcontroller.testing", "down", "--dir", str(CLUSTER)],
                check=False,
            )


if __name__ == "__main__":
    sys.exit(main())
