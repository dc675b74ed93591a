"""``kfjob render`` offline: every example and seed renders with no cluster and no kubeconfig,
showing one pod per replica (MPI: workers, and the launcher as a batch Job), the views work,
and a job admission would refuse is refused with the operator's message and exit 1."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kfjob.cli import main
from kfjob.render import REDACTED, RenderError, render_job, render_text

ROOT = Path(__file__).resolve().parents[2]
KFJOB = Path(sys.executable).parent / "kfjob"
FILES = [
    *sorted(ROOT.glob("examples/*.yaml")),
    *sorted(ROOT.glob("examples/real/*.yaml")),
    *sorted(ROOT.glob("tests/data/seeds/*.yaml")),
]


def kfjob(*args: str, stdin: str | None = None, tmp: Path) -> subprocess.CompletedProcess[str]:
    """The CLI's ``main`` in this process (the installed script costs a Python start-up and the
    whole import per call; ``test_the_installed_console_script_renders`` runs it once), with no
    kubeconfig anywhere: a missing $KUBECONFIG, an empty HOME."""
    env = {"KUBECONFIG": str(tmp / "missing-kubeconfig"), "HOME": str(tmp), "NO_COLOR": "1"}
    out, err = io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        mp.setattr(sys, "stdin", io.StringIO(stdin or ""))
        mp.setattr(sys, "stdout", out)
        mp.setattr(sys, "stderr", err)
        try:
            code = main(list(args))
        except SystemExit as exc:  # argparse's usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(["kfjob", *args], code, out.getvalue(), err.getvalue())


def test_the_installed_console_script_renders(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "KUBECONFIG": str(tmp_path / "missing-kubeconfig"),
        "HOME": str(tmp_path),
        "NO_COLOR": "1",
    }
    env.pop("KUBERNETES_SERVICE_HOST", None)
    seed = str(ROOT / "tests/data/seeds/distributed-tensorflow-job.yaml")
    script = subprocess.run(
        [str(KFJOB), "render", seed], capture_output=True, text=True, env=env, timeout=60
    )
    assert script.returncode == 0, script.stderr
    assert script.stdout == kfjob("render", seed, tmp=tmp_path).stdout


def expected_names(doc: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of the pods the job's replica specs ask for; MPI's launcher is a Job."""
    name = doc["metadata"]["name"]
    specs = next(v for k, v in doc["spec"].items() if k.endswith("ReplicaSpecs"))
    out: set[tuple[str, str]] = set()
    for rtype, spec in specs.items():
        if doc["kind"] == "MPIJob" and rtype == "Launcher":
            continue
        out |= {("Pod", f"{name}-{rtype.lower()}-{i}") for i in range(spec.get("replicas", 1))}
    return out


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_every_example_and_seed_renders_offline(path: Path, tmp_path: Path) -> None:
    result = kfjob("render", str(path), tmp=tmp_path)
    assert result.returncode == 0, result.stderr
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    for doc in docs:
        mine = [
            o
            for o in objects
            if any(r["name"] == doc["metadata"]["name"] for r in o["metadata"]["ownerReferences"])
        ]
        pods = {(o["kind"], o["metadata"]["name"]) for o in mine if o["kind"] == "Pod"}
        assert pods == expected_names(doc)
        assert all(
            o["metadata"]["namespace"] == doc["metadata"].get("namespace", "default") for o in mine
        )
        launcher = [o for o in mine if o["kind"] == "Job"]
        waits = doc["spec"].get("launcherCreationPolicy") == "WaitForWorkersReady"
        if doc["kind"] == "MPIJob" and not waits:
            assert [o["metadata"]["name"] for o in launcher] == [
                f"{doc['metadata']['name']}-launcher"
            ]
        else:
            assert launcher == []
            if waits:
                assert "created once every worker is ready" in result.stderr


def test_stdin_several_documents_and_namespace(tmp_path: Path) -> None:
    both = "\n---\n".join(
        (ROOT / f).read_text()
        for f in ("examples/tfjob-multi-worker.yaml", "tests/data/seeds/mpijob-horovod.yaml")
    )
    result = kfjob("render", "-", "-n", "team-a", stdin=both, tmp=tmp_path)
    assert result.returncode == 0, result.stderr
    objects = [o for o in yaml.safe_load_all(result.stdout) if o]
    owners = {o["metadata"]["ownerReferences"][0]["kind"] for o in objects}
    assert owners == {"TFJob", "MPIJob"}
    assert {o["metadata"]["namespace"] for o in objects} == {"team-a"}


def test_mpi_ssh_secret_is_redacted(tmp_path: Path) -> None:
    result = kfjob("render", str(ROOT / "tests/data/seeds/mpijob-horovod.yaml"), tmp=tmp_path)
    assert result.returncode == 0, result.stderr
    secret = next(o for o in yaml.safe_load_all(result.stdout) if o and o["kind"] == "Secret")
    assert set(secret["data"]) == {"ssh-privatekey", "ssh-publickey"}
    assert set(secret["data"].values()) == {REDACTED}
    assert "PRIVATE KEY" not in result.stdout


def test_env_view_pretty_prints_tf_config(tmp_path: Path) -> None:
    result = kfjob(
        "render",
        "--env",
        str(ROOT / "tests/data/seeds/distributed-tensorflow-job.yaml"),
        tmp=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    block = result.stdout.split("# distributed-tensorflow-job-worker-1\n")[1].split("\n# ")[0]
    text = block.split("TF_CONFIG=", 1)[1]
    config = json.loads(text)
    assert config["task"] == {"type": "worker", "index": 1}
    assert len(config["cluster"]["ps"]) == 2 and len(config["cluster"]["worker"]) == 4
    assert '\n      "cluster": {' in block  # indented, one key a line


def test_table_view_shows_roles_ports_commands(tmp_path: Path) -> None:
    result = kfjob(
        "render", "--table", str(ROOT / "tests/data/seeds/mpijob-horovod.yaml"), tmp=tmp_path
    )
    assert result.returncode == 0, result.stderr
    lines = {line.split()[0]: line for line in result.stdout.splitlines()[1:] if line.strip()}
    assert "mpirun python hovorod_benchmarks.py" in lines["distributed-training-launcher"]
    assert "/usr/sbin/sshd -De" in lines["distributed-training-worker-0"]
    pt = kfjob("render", "--table", str(ROOT / "examples/pytorchjob-mnist.yaml"), tmp=tmp_path)
    master = next(line for line in pt.stdout.splitlines() if "-master-0" in line)
    assert "master" in master.split() and "pytorchjob-port:23456" in master


def test_operator_flags_after_double_dash(tmp_path: Path) -> None:
    seed = str(ROOT / "tests/data/seeds/distributed-pytorch-job.yaml")
    plain = kfjob("render", seed, tmp=tmp_path)
    gang = kfjob("render", seed, "--", "--gang-scheduler-name=my-scheduler", tmp=tmp_path)
    assert gang.returncode == 0, gang.stderr
    kinds = [o["kind"] for o in yaml.safe_load_all(gang.stdout) if o]
    assert "PodGroup" in kinds and "PodGroup" not in plain.stdout
    pods = [o for o in yaml.safe_load_all(gang.stdout) if o and o["kind"] == "Pod"]
    assert len(pods) == 3 and {p["spec"]["schedulerName"] for p in pods} == {"my-scheduler"}
    # Volcano holds pod creation until it admits the group: render says so.
    volcano = kfjob("render", seed, "--", "--gang-scheduler-name=volcano", tmp=tmp_path)
    kinds = [o["kind"] for o in yaml.safe_load_all(volcano.stdout) if o]
    assert kinds == ["PodGroup"] and "once the gang scheduler admits" in volcano.stderr


INVALID = {
    "no chief, master or worker": (
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "bad"},
            "spec": {
                "tfReplicaSpecs": {
                    "PS": {
                        "template": {
                            "spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}
                        }
                    }
                }
            },
        },
        "a Chief, Master or Worker replica is required",
    ),
    "negative replicas": (
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": "bad"},
            "spec": {
                "pytorchReplicaSpecs": {
                    "Master": {
                        "replicas": -1,
                        "template": {"spec": {"containers": [{"name": "pytorch", "image": "pt"}]}},
                    }
                }
            },
        },
        "replicas: Input should be greater than or equal to 0",
    ),
    "name too long for its pods": (
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "x" * 60},
            "spec": {
                "tfReplicaSpecs": {
                    "Worker": {
                        "template": {
                            "spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}
                        }
                    }
                }
            },
        },
        "would exceed 63 characters",
    ),
    "an MPIJob of the retired v1 API": (
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "MPIJob",
            "metadata": {"name": "old"},
            "spec": {},
        },
        "mpi-operator serves kubeflow.org/v2beta1 MPIJob",
    ),
    "an unknown replica type the Go operator accepted": (
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "TFJob",
            "metadata": {"name": "bad"},
            "spec": {
                "tfReplicaSpecs": {
                    r: {
                        "template": {
                            "spec": {"containers": [{"name": "tensorflow", "image": "tf"}]}
                        }
                    }
                    for r in ("Worker", "Trainer")
                }
            },
        },
        "Trainer",
    ),
}


@pytest.mark.parametrize("case", INVALID, ids=list(INVALID))
def test_a_job_admission_refuses_is_refused(case: str, tmp_path: Path) -> None:
    doc, words = INVALID[case]
    with pytest.raises(RenderError, match=None) as caught:
        render_job(doc)
    assert words in str(caught.value)
    result = kfjob("render", "-", stdin=yaml.safe_dump(doc), tmp=tmp_path)
    assert result.returncode == 1
    assert words in " ".join(result.stderr.split())
    assert result.stdout == ""


def test_suspended_and_foreign_jobs_create_nothing() -> None:
    doc = yaml.safe_load((ROOT / "tests/data/seeds/distributed-pytorch-job.yaml").read_text())
    doc["spec"]["runPolicy"] = {"suspend": True}
    [suspended] = render_text(yaml.safe_dump(doc))
    assert suspended.objects == () and "suspended" in suspended.notes[0]
    doc["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}
    [foreign] = render_text(yaml.safe_dump(doc))
    assert foreign.objects == () and "kueue.x-k8s.io/multikueue" in foreign.notes[0]


def test_max_writes_per_reconcile_does_not_cut_a_big_job_short() -> None:
    doc = yaml.safe_load((ROOT / "examples/tfjob-multi-worker.yaml").read_text())
    doc["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] = 150
    [big] = render_text(yaml.safe_dump(doc))
    assert len(big.pods) == 150 and big.passes >= 3  # 100 writes a pass: pods and services


@pytest.mark.parametrize("command", [["list"], ["get", "some-job"], ["submit", "-"]])
def test_commands_that_need_a_cluster_say_so_without_a_kubeconfig(
    command: list[str], tmp_path: Path
) -> None:
    # A new user's first try: no ~/.kube/config, no $KUBECONFIG, not in a pod.
    result = kfjob(*command, stdin="", tmp=tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "no cluster to talk to" in result.stderr
    assert "--kubeconfig" in result.stderr
