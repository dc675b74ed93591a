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
