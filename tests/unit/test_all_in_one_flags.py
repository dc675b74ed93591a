"""training-operator's --enable-scheme, spelt as Kubeflow's training-operator takes it."""

from __future__ import annotations

import pytest

from jobcontroller.operator import add_job_flags
from jobcontroller.runtime.flags import parse_settings
from training_operator.__main__ import add_flags, enabled


def _enabled(*argv: str) -> list[str]:
    def flags(parser):  # type: ignore[no-untyped-def]
        add_job_flags(parser)
        add_flags(parser)

    return enabled(parse_settings(name="training-operator", argv=list(argv), add_flags=flags))


def test_all_kinds_by_default() -> None:
    assert _enabled() == [
        "tfjob",
        "pytorchjob",
        "xgboostjob",
        "mpijob",
        "paddlejob",
        "jaxjob",
        "trainjob",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ("--enable-scheme", "TFJob", "--enable-scheme", "mpijob"),
        ("--enable-scheme", "tfjob,MPIJob"),
        ("--enable-scheme=mpijob,tfjob,tfjob",),
    ],
)
def test_repeated_or_comma_separated_case_insensitive(argv: tuple[str, ...]) -> None:
    assert _enabled(*argv) == ["tfjob", "mpijob"]


@pytest.mark.parametrize(
    ("scheme", "message"),
    [("tfjobs", "unknown scheme 'tfjobs'"), ("mxjob", "unknown scheme 'mxjob'")],
)
def test_an_unknown_kind_is_a_flag_error(
    scheme: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        _enabled("--enable-scheme", scheme)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "installed", "served", "asked"),
    [
        ((), True, True, True),
        ((), False, False, True),
        ((), None, True, True),  # the API server could not say: try, and say so if it fails
        (("--enable-scheme", "trainjob"), False, True, False),  # named: served regardless
        (("--enable-scheme", "tfjob"), False, True, False),  # not asked for: nothing to check
    ],
)
def test_trainjob_is_served_by_default_only_where_jobset_is_installed(
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    installed: bool | None,
    served: bool,
    asked: bool,
) -> None:
    import training_operator.__main__ as main

    calls: list[tuple[str, ...]] = []

    def crds_installed(settings: object, names: tuple[str, ...]) -> bool | None:
        calls.append(tuple(names))
        return installed

    monkeypatch.setattr(main, "crds_installed", crds_installed)
    assert main._serve_trainjob(["run", *argv]) is served
    assert bool(calls) is asked
    if asked:
        assert calls == [
            (
                "jobsets.jobset.x-k8s.io",
                "trainjobs.trainer.kubeflow.org",
                "trainingruntimes.trainer.kubeflow.org",
                "clustertrainingruntimes.trainer.kubeflow.org",
            )
        ]
