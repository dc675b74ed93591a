"""The Worker init container: when pods get it, what it looks like, and what its script does.

The script runs under the system ``sh`` with a stand-in ``nc`` (and a ``sleep`` that does not
sleep) first on PATH, so its loop is exercised without a network or a cluster.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytorch_operator.__main__ import add_flags
from pytorch_operator.api import PyTorchJob, default_pytorchjob
from pytorch_operator.initcontainer import (
    INIT_CONTAINER_NAME,
    WAIT_FOR_MASTER_DNS_SCRIPT,
    WAIT_FOR_MASTER_SCRIPT,
    InitContainerTemplate,
    add_init_container,
    init_container,
)


def _replica(replicas: int, *, port: int | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "pytorch", "image": "pt:1"}
    if port is not None:
        container["ports"] = [{"name": "pytorchjob-port", "containerPort": port}]
    return {"replicas": replicas, "template": {"spec": {"containers": [container]}}}


def _job(specs: dict[str, Any], **spec: Any) -> PyTorchJob:
    raw = {
        "metadata": {"name": "mnist", "namespace": "ns"},
        "spec": {"pytorchReplicaSpecs": specs, **spec},
    }
    return default_pytorchjob(PyTorchJob.parse(raw))


def test_workers_of_a_job_with_a_master_wait_for_the_masters_address_and_port() -> None:
    job = _job({"Master": _replica(1, port=29500), "Worker": _replica(2)})
    container = init_container(job, image="busybox:1.36", max_tries=7)
    assert container is not None
    assert (container["name"], container["image"]) == ("init-pytorch", "busybox:1.36")
    assert container["command"] == ["sh", "-c", WAIT_FOR_MASTER_SCRIPT]
    assert container["env"] == [
        {"name": "MASTER_ADDR", "value": "mnist-master-0"},
        {"name": "MASTER_PORT", "value": "29500"},
        {"name": "MAX_TRIES", "value": "7"},
    ]
    assert container["resources"]["limits"] == {"cpu": "100m", "memory": "20Mi"}


@pytest.mark.parametrize(
    ("specs", "rtype", "elastic"),
    [
        ({"Master": _replica(1), "Worker": _replica(1)}, "Master", None),
        ({"Worker": _replica(2)}, "Worker", None),
        ({"Worker": _replica(2)}, "Worker", {"minReplicas": 1}),
    ],
    ids=["the-master-itself", "no-master", "elastic-no-master"],
)
def test_pods_with_nobody_to_wait_for_get_no_init_container(
    specs: dict[str, Any], rtype: str, elastic: dict[str, Any] | None
) -> None:
    job = _job(specs, **({"elasticPolicy": elastic} if elastic is not None else {}))
    template: dict[str, Any] = {"spec": {"containers": []}}
    add_init_container(job, template, rtype=rtype, image="busybox", max_tries=1)
    assert "initContainers" not in template["spec"]


def test_init_container_goes_after_the_users_own_and_is_not_added_twice() -> None:
    job = _job({"Master": _replica(1), "Worker": _replica(1)})
    template: dict[str, Any] = {"spec": {"initContainers": [{"name": "fetch-data"}]}}
    for _ in range(2):
        add_init_container(job, template, rtype="Worker", image="busybox", max_tries=1)
    assert [c["name"] for c in template["spec"]["initContainers"]] == [
        "fetch-data",
        INIT_CONTAINER_NAME,
    ]


def _run_script(
    tmp_path: Path,
    nc_body: str,
    *,
    max_tries: int,
    script: str = WAIT_FOR_MASTER_SCRIPT,
    tool: str = "nc",
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in {tool: nc_body, "sleep": "exit 0"}.items():
        tool = bin_dir / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "MASTER_ADDR": "mnist-master-0",
        "MASTER_PORT": "23456",
        "MAX_TRIES": str(max_tries),
        "CALLS": str(tmp_path / "calls"),
    }
    return subprocess.run(
        ["sh", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


# Records its arguments; the probe against 127.0.0.1 (the -z support check) is refused.
_NC_UP_ON_THIRD_TRY = """
[ "$4" = 127.0.0.1 ] && exit 1
echo "$@" >> "$CALLS"
[ "$(wc -l < "$CALLS")" -ge 3 ]
"""


def test_script_retries_until_the_master_port_accepts_connections(tmp_path: Path) -> None:
    result = _run_script(tmp_path, _NC_UP_ON_THIRD_TRY, max_tries=5)
    assert result.returncode == 0, result.stdout + result.stderr
    calls = (tmp_path / "calls").read_text().splitlines()
    assert calls == ["-z -w 2 mnist-master-0 23456"] * 3
    assert "waiting for master mnist-master-0:23456 (2/5)" in result.stdout


def test_script_gives_up_after_max_tries(tmp_path: Path) -> None:
    result = _run_script(tmp_path, _NC_UP_ON_THIRD_TRY, max_tries=2)
    assert result.returncode == 1
    assert len((tmp_path / "calls").read_text().splitlines()) == 2
    assert "not reachable after 2 tries" in result.stdout


def test_script_fails_fast_when_nc_has_no_z_option(tmp_path: Path) -> None:
    no_z = "echo \"nc: invalid option -- 'z'\" >&2; exit 1"
    result = _run_script(tmp_path, no_z, max_tries=100)
    assert result.returncode == 2
    assert "--pytorch-init-container-image" in result.stdout


def test_script_without_a_limit_waits_as_long_as_it_takes(tmp_path: Path) -> None:
    """The default (0): a master that loads data for long does not fail its workers."""
    slow = """
[ "$4" = 127.0.0.1 ] && exit 1
echo "$@" >> "$CALLS"
[ "$(wc -l < "$CALLS")" -ge 150 ]
"""
    result = _run_script(tmp_path, slow, max_tries=0)
    assert result.returncode == 0, result.stdout[-500:] + result.stderr
    assert len((tmp_path / "calls").read_text().splitlines()) == 150
    assert "waiting for master mnist-master-0:23456 (149)" in result.stdout


def test_dns_check_waits_until_the_name_resolves_as_v1_9_did(tmp_path: Path) -> None:
    resolves_on_second = """
echo "$@" >> "$CALLS"
[ "$(wc -l < "$CALLS")" -ge 2 ]
"""
    result = _run_script(
        tmp_path,
        resolves_on_second,
        max_tries=5,
        script=WAIT_FOR_MASTER_DNS_SCRIPT,
        tool="nslookup",
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "calls").read_text().splitlines() == ["mnist-master-0"] * 2
    assert "master mnist-master-0 resolves" in result.stdout


def test_template_file_replaces_the_built_in_container(tmp_path: Path) -> None:
    """v1.9's --pytorch-init-container-template-file, with its fields."""
    file = tmp_path / "initContainer.yaml"
    file.write_text(
        "- name: wait-for-master\n"
        "  image: {{.InitContainerImage}}\n"
        "  command: ['sh', '-c', 'until nslookup {{ .MasterAddr }}; do sleep 2; done']\n"
        "  env: [{name: PORT, value: '{{.MasterPort}}'}, {name: TRIES, value: '{{.MaxTries}}'}]\n"
    )
    template = InitContainerTemplate.load(file)
    assert template is not None
    job = _job({"Master": _replica(1, port=29500), "Worker": _replica(2)})
    pod: dict[str, Any] = {"spec": {"containers": []}}
    add_init_container(
        job, pod, rtype="Worker", image="busybox:1.37", max_tries=9, file_template=template
    )
    assert pod["spec"]["initContainers"] == [
        {
            "name": "wait-for-master",
            "image": "busybox:1.37",
            "command": ["sh", "-c", "until nslookup mnist-master-0; do sleep 2; done"],
            "env": [{"name": "PORT", "value": "29500"}, {"name": "TRIES", "value": "9"}],
        }
    ]
    assert InitContainerTemplate.load(tmp_path / "absent.yaml") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("- name: x\n  image: {{.Image}}\n", "unknown: Image"),
        ("- name: x\n  image: {{if .MaxTries}}y{{end}}\n", "only"),
        ("name: x\nimage: y\n", "YAML list of containers"),
        ("- name: x\n  image: [y\n", "initContainer.yaml: while parsing"),
    ],
)
def test_a_template_file_that_cannot_work_is_refused_at_start_up(
    tmp_path: Path, text: str, expected: str
) -> None:
    file = tmp_path / "initContainer.yaml"
    file.write_text(text)
    parser = argparse.ArgumentParser(exit_on_error=False)
    add_flags(parser)
    with pytest.raises(argparse.ArgumentError, match=expected):
        parser.parse_args(["--pytorch-init-container-template-file", str(file)])


def test_flags_default_to_no_limit_and_the_tcp_check(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    add_flags(parser)
    args = parser.parse_args(
        ["--pytorch-init-container-template-file", str(tmp_path / "absent.yaml")]
    )
    assert args.pytorch_init_container_max_tries == 0
    assert args.pytorch_init_container_check == "tcp"
    assert args.pytorch_init_container_template_file is None


def test_flags_without_a_template_file_never_import_pyyaml() -> None:
    """argparse converts the default path as well; with no file there, the operator does not
    pay PyYAML's memory (a pod's in-cluster credentials need no YAML either)."""
    code = (
        "import argparse, sys\n"
        "from pytorch_operator.__main__ import add_flags\n"
        "parser = argparse.ArgumentParser()\n"
        "add_flags(parser)\n"
        "parser.parse_args(['--pytorch-init-container-template-file', '/nonexistent/t.yaml'])\n"
        "print('yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
