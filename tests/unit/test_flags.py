"""Shared operator flags: defaults, the optional ``run`` subcommand, aliases, framework flags."""

from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

import pytest

from jobcontroller.runtime import flags
from jobcontroller.runtime.flags import Settings, parse_settings


@pytest.fixture(autouse=True)
def no_pod_namespace(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(flags, "SERVICE_ACCOUNT_NAMESPACE_FILE", tmp_path / "absent")


def test_defaults_match_the_anchors() -> None:
    s = parse_settings(name="tf-operator", argv=[], environ={})
    assert s == Settings(
        namespace="",
        workers=4,
        kube_api_qps=20.0,
        kube_api_burst=30,
        metrics_port=8080,
        health_port=8081,
        leader_elect=False,
        leader_election_namespace="kubeflow",
        leader_election_id="tf-operator",
        leader_election_lease_duration=15.0,
        leader_election_renew_deadline=10.0,
        leader_election_retry_period=2.0,
        log_format="json",
        log_level="info",
        extras={},
    )


def test_run_subcommand_is_optional() -> None:
    argv = ["--namespace", "team-a", "--workers", "8", "--leader-elect"]
    with_run = parse_settings(name="op", argv=["run", *argv], environ={})
    without = parse_settings(name="op", argv=argv, environ={})
    assert with_run == without
    assert (with_run.namespace, with_run.workers, with_run.leader_elect) == ("team-a", 8, True)


@pytest.mark.parametrize("flag", ["--workers", "--controller-threads", "--threadiness"])
def test_anchor_spellings_of_the_worker_count(flag: str) -> None:
    assert parse_settings(name="op", argv=[flag, "3"], environ={}).workers == 3


def test_all_shared_flags_parse() -> None:
    s = parse_settings(
        name="op",
        argv=[
            "run",
            "--kubeconfig=/tmp/kc",
            "--kube-api-qps=50",
            "--kube-api-burst=80",
            "--bind-address=127.0.0.1",
            "--metrics-port=0",
            "--health-port=0",
            "--leader-election-namespace=ops",
            "--leader-election-id=my-lease",
            "--leader-election-lease-duration=4",
            "--leader-election-renew-deadline=3",
            "--leader-election-retry-period=0.5",
            "--log-format=console",
            "--log-level=DEBUG",
        ],
        environ={},
    )
    assert s.kubeconfig == "/tmp/kc"
    assert (s.kube_api_qps, s.kube_api_burst) == (50.0, 80)
    assert (s.bind_address, s.metrics_port, s.health_port) == ("127.0.0.1", 0, 0)
    assert (s.leader_election_namespace, s.leader_election_id) == ("ops", "my-lease")
    assert (
        s.leader_election_lease_duration,
        s.leader_election_renew_deadline,
        s.leader_election_retry_period,
    ) == (4.0, 3.0, 0.5)
    assert (s.log_format, s.log_level) == ("console", "debug")


def test_namespace_defaults_to_kubeflow_namespace_env() -> None:
    s = parse_settings(name="op", argv=[], environ={"KUBEFLOW_NAMESPACE": "kubeflow"})
    assert s.namespace == "kubeflow"
    assert (
        parse_settings(
            name="op", argv=["--namespace="], environ={"KUBEFLOW_NAMESPACE": "x"}
        ).namespace
        == ""
    )


def test_leader_election_namespace_defaults_to_the_pods_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sa = tmp_path / "namespace"
    sa.write_text("operators\n")
    monkeypatch.setattr(flags, "SERVICE_ACCOUNT_NAMESPACE_FILE", sa)
    assert parse_settings(name="op", argv=[], environ={}).leader_election_namespace == "operators"


def test_framework_flags_land_in_extras() -> None:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--gang-scheduler-name", default="")
        parser.add_argument("--pytorch-init-container-max-tries", type=int, default=100)

    s = parse_settings(
        name="op", argv=["run", "--gang-scheduler-name=volcano"], add_flags=add, environ={}
    )
    assert s.extras == {"gang_scheduler_name": "volcano", "pytorch_init_container_max_tries": 100}


def test_framework_flags_are_read_typed_and_a_wrong_name_or_type_is_an_error() -> None:
    def add(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--tries", type=int, default=100)
        parser.add_argument("--template", default=None)

    s = parse_settings(name="op", argv=["--tries=3"], add_flags=add, environ={})
    assert s.flag("tries", int) == 3
    assert s.optional_flag("template", str) is None
    assert s.flag("absent", str, "fallback") == "fallback"
    with pytest.raises(KeyError, match="trys"):
        s.flag("trys", int)  # a misspelt dest is not silently a default
    with pytest.raises(TypeError, match="'tries' is a int, not a str"):
        s.flag("tries", str)
    with pytest.raises(TypeError, match="tries"):
        s.optional_flag("tries", str)


@pytest.mark.parametrize(
    "argv",
    [
        ["--workers=0"],
        ["--metrics-port=70000"],
        ["--log-format=xml"],
        ["--log-level=loud"],
        ["--leader-election-lease-duration=10"],  # not above the 10 s renew deadline
        ["--leader-election-renew-deadline=2"],  # not above 1.2 * the 2 s retry period
        ["--no-such-flag"],
        ["serve"],
    ],
)
def test_bad_flags_exit_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_settings(name="op", argv=argv, environ={})
    assert exc.value.code == 2
    assert "usage: op [run] [options]" in capsys.readouterr().err


def test_help_lists_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_settings(name="op", argv=["--help"], environ={})
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "--leader-election-id" in out and "(default: op)" in out


@pytest.mark.parametrize(
    "main",
    ["tf_operator.__main__", "pytorch_operator.__main__", "mpi_operator.__main__"],
)
def test_every_flag_has_help_and_no_empty_or_doubled_default(
    main: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    module = importlib.import_module(main)
    with pytest.raises(SystemExit) as exc:
        module.main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "(default: )" not in out and "(default: None)" not in out, out
    assert "(default: False)" not in out
    # Each flag line is followed by its help: no flag stands alone.
    parser = flags.build_parser(name="op")
    for action in parser._actions:
        assert action.help, action.option_strings
    # One default per flag, never two that disagree.
    for block in re.split(r"\n  -", out):
        assert block.count("default") <= 1 or "(default:" not in block, block


def test_version_names_the_operator_and_the_base(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_settings(name="tf-operator", argv=["--version"], environ={})
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert re.fullmatch(r"tf-operator \S+ \(jobcontroller \S+\)\n", out), out


def test_training_operator_bind_address_flags_are_accepted() -> None:
    """An existing training-operator Deployment's args keep working."""
    s = parse_settings(
        name="op",
        argv=["--metrics-bind-address=:9443", "--health-probe-bind-address", ":9444"],
        environ={},
    )
    assert (s.bind_address, s.metrics_port, s.health_port) == ("0.0.0.0", 9443, 9444)
    s = parse_settings(name="op", argv=["--metrics-bind-address=127.0.0.1:8080"], environ={})
    assert (s.bind_address, s.metrics_port) == ("127.0.0.1", 8080)
    assert "metrics_bind_address" not in s.extras


@pytest.mark.parametrize(
    "argv",
    [
        ["--metrics-bind-address=8080"],
        ["--metrics-bind-address=10.0.0.1:1", "--health-probe-bind-address=10.0.0.2:2"],
    ],
)
def test_bad_bind_addresses_are_refused(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_settings(name="op", argv=argv, environ={})
    assert exc.value.code == 2
