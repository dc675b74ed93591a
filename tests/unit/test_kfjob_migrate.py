"""``kfjob migrate``: every example and seed of a migrated kind becomes a TrainJob whose pods run
what the v1 job's pods ran (same image, command, args, resources, node count, and the v1
operator's RANK/WORLD_SIZE/... per pod), compared by both operators' own planners offline; what
a TrainJob cannot carry is a warning, never silently lost."""

from __future__ import annotations

import copy
import io
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kfjob.cli import main
from kfjob.migrate import MigrateError, migrate
from kfjob.migrate.check import Check, check, report_lines
from trainer_operator import TrainingRuntime, TrainJob

ROOT = Path(__file__).resolve().parents[2]
KINDS = ("PyTorchJob", "JAXJob", "XGBoostJob", "MPIJob")
Obj = dict[str, Any]


def _docs(path: Path) -> list[Obj]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


FILES = [
    p
    for p in (
        *sorted(ROOT.glob("examples/*.yaml")),
        *sorted(ROOT.glob("examples/real/*.yaml")),
        *sorted(ROOT.glob("tests/data/seeds/*.yaml")),
    )
    if any(d.get("kind") in KINDS for d in _docs(p))
]


def _one(path: str) -> Obj:
    [doc] = _docs(ROOT / path)
    return doc


def _pytorch(**spec: Any) -> Obj:
    doc = _one("examples/pytorchjob-mnist.yaml")
    doc["spec"].update(copy.deepcopy(spec))
    return doc


def _warned(warnings: tuple[str, ...], path: str) -> list[str]:
    return [w for w in warnings if w.startswith(path)]


def test_the_examples_cover_every_kind() -> None:
    kinds = {d["kind"] for p in FILES for d in _docs(p)}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_example_migrates_to_objects_the_api_takes(path: Path) -> None:
    for doc in _docs(path):
        m = migrate(doc)
        TrainJob.parse(m.trainjob)
        if m.runtime is not None:
            TrainingRuntime.parse(m.runtime)
            assert m.trainjob["spec"]["runtimeRef"] == {
                "apiGroup": "trainer.kubeflow.org",
                "kind": "TrainingRuntime",
                "name": m.runtime["metadata"]["name"],
            }
            assert m.documents() == [m.runtime, m.trainjob]  # the runtime is applied first
        assert m.trainjob["metadata"]["name"] == doc["metadata"]["name"]


def _check(doc: Obj) -> Check:
    result = check(migrate(doc))
    assert result.not_rendered is None, result.not_rendered
    return result


NODE_SET_FILES = [p for p in FILES if _docs(p)[0]["kind"] != "MPIJob"]


@pytest.mark.parametrize("path", NODE_SET_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_trainjob_pods_run_what_the_v1_pods_ran(path: Path) -> None:
    """Rank by rank: same image and resources; the v1 env, each variable there (the host
    names are the TrainJob's), ranks, world sizes and ports the same; the first pod's command
    and args. (Later pods differ only where the v1 templates differed: the warnings say so.)"""
    [doc] = _docs(path)
    result = _check(doc)
    m = result.migration
    assert len(result.trainjob) == len(result.v1)
    assert m.trainjob["spec"]["trainer"]["numNodes"] == len(result.v1)
    for a, b in zip(result.v1, result.trainjob, strict=True):
        assert (b.image, b.resources) == (a.image, a.resources)
        assert set(a.env) <= set(b.env), set(a.env) - set(b.env)
        for name in ("RANK", "WORLD_SIZE", "MASTER_PORT", "PROCESS_ID", "NUM_PROCESSES"):
            assert b.env.get(name) == a.env.get(name), name
    first_v1, first = result.v1[0], result.trainjob[0]
    assert (first.command, first.args) == (first_v1.command, first_v1.args)
    for a, b in zip(result.v1[1:], result.trainjob[1:], strict=True):
        if (a.command, a.args) != (b.command, b.args):
            assert _warned(m.warnings, f"spec.{_specs_key(doc)}.Worker.template.spec.containers")


def _specs_key(doc: Obj) -> str:
    return next(k for k in doc["spec"] if k.endswith("ReplicaSpecs"))


def test_pytorch_seed_runs_on_the_shipped_runtime_with_its_annotations_patched_in() -> None:
    m = migrate(_one("tests/data/seeds/distributed-pytorch-job.yaml"))
    assert m.runtime is None and m.warnings == ()
    spec = m.trainjob["spec"]
    assert spec["runtimeRef"]["name"] == "torch-distributed"
    assert spec["trainer"]["image"] == "gcr.io/kubeflow-ci/pytorch-dist-mnist_test:1.0"
    assert spec["trainer"]["args"] == ["--backend", "gloo"]
    assert "command" not in spec["trainer"]  # the image's entrypoint, as in v1
    [patch] = spec["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]
    assert pod["template"]["spec"]["template"]["metadata"] == {
        "annotations": {"sidecar.istio.io/inject": "false"}
    }
    [pod0, *_] = check(m).trainjob
    assert pod0.env["MASTER_ADDR"] == "distributed-pytorch-job-node-0-0.distributed-pytorch-job"


def test_xgboost_example_per_replica_differences_are_warned_and_the_runtime_carries_the_rest() -> (
    None
):
    m = migrate(_one("examples/xgboostjob-iris.yaml"))
    assert len(m.warnings) == 2
    assert _warned(m.warnings, "spec.xgbReplicaSpecs.Worker.template.spec.containers[xgboost].args")
    assert _warned(m.warnings, "spec.xgbReplicaSpecs.Worker.restartPolicy")
    assert m.runtime is not None
    [node] = m.runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["containers"][0]["imagePullPolicy"] == "Always"
    assert pod["restartPolicy"] == "Never"  # Master's restartPolicy
    assert m.runtime["spec"]["mlPolicy"] == {"numNodes": 3, "xgboost": {}}


def test_mpijob_maps_to_an_mpi_runtime_launcher_as_trainer() -> None:
    doc = _one("examples/mpijob-horovod.yaml")
    m = migrate(doc)
    trainer = m.trainjob["spec"]["trainer"]
    launcher = doc["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]
    assert trainer["command"] == launcher["command"]
    assert trainer["image"] == launcher["image"]
    assert (trainer["numNodes"], trainer["numProcPerNode"]) == (2, 1)
    assert m.runtime is not None
    assert m.runtime["spec"]["mlPolicy"]["mpi"] == {
        "numProcPerNode": 1,
        "mpiImplementation": "OpenMPI",
        "sshAuthMountPath": "/root/.ssh",
        "runLauncherAsNode": False,
    }
    node, launcher_job = m.runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert launcher_job["name"] == "launcher"
    assert launcher_job["template"]["metadata"]["labels"] == {
        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
    }
    [worker] = node["template"]["spec"]["template"]["spec"]["containers"]
    assert worker["command"] == ["/usr/sbin/sshd", "-De"]  # what mpi-operator ran there
    assert worker["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert _warned(m.warnings, "spec.runPolicy.cleanPodPolicy")


def test_mpi_seed_wait_for_workers_ready_is_depends_on() -> None:
    m = migrate(_one("examples/real/mpijob-allreduce.yaml"))
    assert m.runtime is not None
    _, launcher = m.runtime["spec"]["template"]["spec"]["replicatedJobs"]
    assert launcher["dependsOn"] == [{"name": "node", "status": "Ready"}]
    seed = migrate(_one("tests/data/seeds/mpijob-horovod.yaml"))
    assert seed.trainjob["spec"]["trainer"]["command"] == [
        "mpirun",
        "python",
        "hovorod_benchmarks.py",
    ]


def test_mpijob_check_renders_both_sides_pod_for_pod() -> None:
    result = check(migrate(_one("examples/mpijob-horovod.yaml")))
    assert result.not_rendered is None
    assert len(result.v1) == len(result.trainjob) == 3
    text = "\n".join(report_lines(result))
    assert "tensorflow-horovod-launcher (Job) -> tensorflow-horovod-launcher-0-0" in text
    assert "tensorflow-horovod-worker-1 -> tensorflow-horovod-node-0-1" in text


def test_run_policy_and_metadata_carry_over() -> None:
    doc = _pytorch(
        runPolicy={
            "suspend": True,
            "activeDeadlineSeconds": 60,
            "managedBy": "kueue.x-k8s.io/multikueue",
        }
    )
    doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
    doc["metadata"]["annotations"] = {
        "a": "b",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    m = migrate(doc)
    spec = m.trainjob["spec"]
    assert (spec["suspend"], spec["activeDeadlineSeconds"], spec["managedBy"]) == (
        True,
        60,
        "kueue.x-k8s.io/multikueue",
    )
    assert m.trainjob["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "team"}
    assert m.trainjob["metadata"]["annotations"] == {"a": "b"}
    assert m.warnings == ()


def test_fields_a_trainjob_cannot_carry_are_each_warned() -> None:
    doc = _pytorch(
        runPolicy={
            "backoffLimit": 3,
            "ttlSecondsAfterFinished": 60,
            "schedulingPolicy": {"minAvailable": 3},
            "cleanPodPolicy": "All",
        },
        elasticPolicy={"rdzvBackend": "c10d", "minReplicas": 1, "maxReplicas": 3},
        nprocPerNode="gpu",
    )
    warnings = migrate(doc).warnings
    for path in (
        "spec.runPolicy.backoffLimit",
        "spec.runPolicy.ttlSecondsAfterFinished",
        "spec.runPolicy.schedulingPolicy",
        "spec.runPolicy.cleanPodPolicy",
        "spec.elasticPolicy",
        "spec.nprocPerNode",
    ):
        assert _warned(warnings, path), path


def test_numeric_nproc_per_node_is_num_proc_per_node() -> None:
    m = migrate(_pytorch(nprocPerNode="4"))
    assert m.trainjob["spec"]["trainer"]["numProcPerNode"] == 4
    env = {e["name"]: e.get("value") for e in m.trainjob["spec"]["trainer"]["env"]}
    assert env["WORLD_SIZE"] == "12"  # v1's: 3 pods x 4 processes


def test_sidecars_and_pod_fields_a_patch_cannot_set_go_into_a_runtime() -> None:
    doc = _pytorch()
    for rtype in ("Master", "Worker"):
        spec = doc["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]
        spec["containers"].append({"name": "sidecar", "image": "busybox"})
        spec["hostNetwork"] = True
        spec["nodeSelector"] = {"gpu": "a100"}
    m = migrate(doc)
    assert m.runtime is not None and "runtimePatches" not in m.trainjob["spec"]
    [node] = m.runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["node", "sidecar"]
    assert (pod["hostNetwork"], pod["nodeSelector"]) == (True, {"gpu": "a100"})
    assert node["template"]["metadata"]["labels"]  # the shipped runtime's ancestor label kept
    result = check(m)
    assert all("sidecar" in p.others for p in result.trainjob)


def test_pod_fields_a_patch_can_set_go_into_runtime_patches() -> None:
    m = migrate(_one("examples/real/pytorchjob-ddp.yaml"))
    # imagePullPolicy: Never needs a runtime; with one, the rest is in its template too.
    assert m.runtime is not None
    doc = _one("examples/real/pytorchjob-ddp.yaml")
    for rtype in ("Master", "Worker"):
        c = doc["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]
        c.pop("imagePullPolicy", None)  # one template (a YAML anchor) for both
    m = migrate(doc)
    assert m.runtime is None
    [patch] = m.trainjob["spec"]["runtimePatches"]
    pod = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]
    spec = pod["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"jobcontroller.dev/real-node": "true"}
    assert spec["volumes"] == [{"name": "scripts", "configMap": {"name": "scripts"}}]
    assert spec["containers"] == [
        {"name": "node", "volumeMounts": [{"name": "scripts", "mountPath": "/scripts"}]}
    ]
    TrainJob.parse(m.trainjob)
    assert check(m).not_rendered is None


def test_reserved_env_is_dropped_with_a_warning() -> None:
    doc = _pytorch()
    for rtype in ("Master", "Worker"):
        c = doc["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]
        c["env"] = [{"name": "PET_NNODES", "value": "9"}, {"name": "MINE", "value": "1"}]
    m = migrate(doc)
    names = [e["name"] for e in m.trainjob["spec"]["trainer"]["env"]]
    assert "PET_NNODES" not in names and names[0] == "MINE"
    assert len(_warned(m.warnings, "spec.pytorchReplicaSpecs.Master")) == 1
    assert check(m).not_rendered is None  # the TrainJob is not refused


def test_user_env_wins_over_the_v1_env_and_no_v1_env_leaves_it_out() -> None:
    doc = _pytorch()
    for rtype in ("Master", "Worker"):
        c = doc["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]
        c["env"] = [{"name": "MASTER_PORT", "value": "1234"}]
    env = migrate(doc).trainjob["spec"]["trainer"]["env"]
    assert [e for e in env if e["name"] == "MASTER_PORT"] == [
        {"name": "MASTER_PORT", "value": "1234"}
    ]
    bare = migrate(_pytorch(), v1_env=False)
    assert "env" not in bare.trainjob["spec"]["trainer"]
    assert bare.warnings == ()  # the example names no port: the v1 default is nobody's loss
    xgb = migrate(_one("examples/xgboostjob-iris.yaml"), v1_env=False)
    assert _warned(
        xgb.warnings, "spec.xgbReplicaSpecs.Master.template.spec.containers[xgboost].ports"
    )


def test_kinds_without_a_trainer_runtime_and_refused_jobs_are_errors() -> None:
    with pytest.raises(MigrateError, match="TFJob has no Kubeflow Trainer v2 runtime"):
        migrate(_one("examples/tfjob-ps-worker.yaml"))
    bad = _pytorch()
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    with pytest.raises(MigrateError, match="would be refused"):
        migrate(bad)


def _kfjob(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NO_COLOR", "1")
        mp.setenv("KUBECONFIG", str(tmp / "missing"))
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        code = main(list(args))
    return subprocess.CompletedProcess(["kfjob", *args], code, out.getvalue(), err.getvalue())


def test_cli_prints_the_objects_and_warns_on_stderr(tmp_path: Path) -> None:
    done = _kfjob("migrate", str(ROOT / "examples/xgboostjob-iris.yaml"), tmp=tmp_path)
    assert done.returncode == 0, done.stderr
    kinds = [d["kind"] for d in yaml.safe_load_all(done.stdout) if d]
    assert kinds == ["TrainingRuntime", "TrainJob"]
    assert done.stderr.count("warning: XGBoostJob xgboost-dist-iris-test-train:") == 2


def test_cli_check_reports_and_exits_zero_even_for_mpi(tmp_path: Path) -> None:
    for name in ("pytorchjob-mnist.yaml", "mpijob-horovod.yaml"):
        done = _kfjob("migrate", "--check", str(ROOT / "examples" / name), tmp=tmp_path)
        assert done.returncode == 0, done.stderr
        assert " -> TrainJob " in done.stdout
    done = _kfjob("migrate", "--check", str(ROOT / "examples/pytorchjob-mnist.yaml"), tmp=tmp_path)
    assert "env ~ MASTER_ADDR: distributed-pytorch-job-master-0 -> " in done.stdout


def test_cli_refuses_what_it_cannot_migrate(tmp_path: Path) -> None:
    done = _kfjob("migrate", str(ROOT / "examples/tfjob-ps-worker.yaml"), tmp=tmp_path)
    assert done.returncode == 1
    assert "error: TFJob has no Kubeflow Trainer v2 runtime" in done.stderr


def test_the_transcripts_in_docs_cli_are_what_kfjob_prints(tmp_path: Path) -> None:
    docs = (ROOT / "docs" / "cli.md").read_text()
    done = _kfjob("migrate", str(ROOT / "examples/pytorchjob-mnist.yaml"), tmp=tmp_path)
    assert done.stdout in docs
    done = _kfjob(
        "migrate", "--check", str(ROOT / "tests/data/seeds/mpijob-horovod.yaml"), tmp=tmp_path
    )
    assert done.stdout in docs
    done = _kfjob("migrate", "--check", str(ROOT / "examples/jaxjob-simple.yaml"), tmp=tmp_path)
    shown = done.stdout.split("  jaxjob-simple-worker-1")[0]
    assert shown in docs


def test_a_root_mpijob_is_warned_that_v2s_key_mode_refuses_root() -> None:
    """v2.3.0 mounts the SSH key 0640, which ssh refuses to root (the conformance run of a
    root image failed so): a migrated root MPIJob says so; a non-root one does not."""
    doc = _one("examples/real/mpijob-allreduce.yaml")
    [root] = _warned(migrate(doc).warnings, "spec.mpiReplicaSpecs: runs as root")
    assert "0640" in root and "non-root user with fsGroup" in root
    for spec in doc["spec"]["mpiReplicaSpecs"].values():
        spec["template"]["spec"]["securityContext"] = {"runAsUser": 1000, "fsGroup": 1000}
    assert not _warned(migrate(doc).warnings, "spec.mpiReplicaSpecs: runs as root")
