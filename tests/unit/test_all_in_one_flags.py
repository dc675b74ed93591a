"""training-operator's --enable-scheme, spelt as Kubeflow's training-operator takes it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from jobcontroller.operator import add_job_flags
from jobcontroller.runtime.flags import Settings, parse_settings
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
    ],
)
def test_trainjob_is_served_by_default_only_where_jobset_is_installed(
    monkeypatch: pytest.MonkeyPatch,
    argv: tuple[str, ...],
    installed: bool | None,
    served: bool,
    asked: bool,
) -> None:
    """JobSet's and Trainer's CRDs are asked for with the PodGroup CRDs, in one lookup."""
    import training_operator.__main__ as main

    calls: list[tuple[str, ...]] = []
    looked_up: list[object] = []

    def lookup_crds(
        settings: object, names: list[str], needed: Sequence[str] = ()
    ) -> dict[str, bool | None]:
        calls.append(tuple(names))
        # Found missing, the TrainJob controller's CRDs end the lookups (nothing then needs
        # the PodGroup CRDs).
        assert list(needed) == ([] if not asked else list(main.TRAINJOB_CRDS))
        return {name: installed if name in main.TRAINJOB_CRDS else True for name in names}

    def pod_groups(settings: object, answers: dict[str, bool | None]) -> frozenset[str]:
        looked_up.append(answers)
        return frozenset({"PodGroup"})

    monkeypatch.setattr(main, "lookup_crds", lookup_crds)
    monkeypatch.setattr(main, "installed_pod_groups", pod_groups)
    serve, kinds = main._trainjob_lookups(["run", *argv])
    assert serve is served
    assert kinds == (frozenset({"PodGroup"}) if served else frozenset())
    trainjob_crds = (
        "jobsets.jobset.x-k8s.io",
        "trainjobs.trainer.kubeflow.org",
        "trainingruntimes.trainer.kubeflow.org",
        "clustertrainingruntimes.trainer.kubeflow.org",
    )
    pod_group_crds = ("podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh")
    assert calls == [(trainjob_crds if asked else ()) + pod_group_crds]
    # The PodGroup kinds are read from the same answers, not asked for again.
    assert looked_up == (
        [
            dict.fromkeys(pod_group_crds, True)
            | dict.fromkeys(trainjob_crds if asked else (), installed)
        ]
        if served
        else []
    )


def test_nothing_is_looked_up_when_trainjobs_are_not_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import training_operator.__main__ as main

    def lookup_crds(settings: object, names: list[str], **_: object) -> dict[str, bool | None]:
        raise AssertionError(f"looked up {names}")

    monkeypatch.setattr(main, "lookup_crds", lookup_crds)
    assert main._trainjob_lookups(["run", "--enable-scheme", "tfjob"]) == (True, frozenset())
    assert main._trainjob_lookups(["manifests"]) == (True, frozenset())


def test_deciding_to_serve_trainjobs_asks_for_the_controllers_crds_without_importing_it() -> None:
    """The all-in-one spells the TrainJob controller's CRDs out, so a cluster without JobSet
    never loads the trainer operator; the two lists must stay the same."""
    import subprocess
    import sys

    from trainer_operator.controller import TrainJobController
    from trainer_operator.podgroups import POD_GROUP_CRDS
    from training_operator.__main__ import POD_GROUP_CRDS as SPELLED_OUT
    from training_operator.__main__ import TRAINJOB_CRDS

    assert TrainJobController.required_crds == TRAINJOB_CRDS
    assert tuple(POD_GROUP_CRDS.values()) == SPELLED_OUT
    probe = (
        "import sys, training_operator.__main__ as m\n"
        "m.lookup_crds = lambda settings, names, needed: dict.fromkeys(names, False)\n"
        "assert m._trainjob_lookups(['run']) == (False, frozenset())\n"
        "heavy = ('trainer_operator', 'cryptography')\n"
        "print(sorted(n for n in sys.modules if n.startswith(heavy)))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "[]"  # (the warning goes to stdout first)


def test_the_served_trainjob_controller_watches_the_installed_pod_group_kinds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The PodGroup CRDs are looked up once, before the operator starts, and only when
    TrainJobs are served; the TrainJob controller owns the kinds found."""
    import training_operator.__main__ as main
    from jobcontroller import PlanConfig
    from trainer_operator.controller import TrainJobController
    from trainer_operator.podgroups import COSCHEDULING_KIND, VOLCANO_KIND

    looked_up: list[object] = []
    built: list[Any] = []
    monkeypatch.setattr(
        main, "lookup_crds", lambda settings, names, needed: dict.fromkeys(names, True)
    )

    def installed(settings: object, answers: object = None) -> frozenset[str]:
        looked_up.append(settings)
        return frozenset({VOLCANO_KIND})

    def run(**kwargs: Any) -> int:
        if kwargs["argv"][0] == "manifests":
            return 0
        settings = parse_settings(name=main.NAME, argv=kwargs["argv"], add_flags=main._flags)
        built.extend(kwargs["controllers"](PlanConfig(), settings))
        return 0

    monkeypatch.setattr(main, "installed_pod_groups", installed)
    monkeypatch.setattr(main, "run_job_operators", run)
    assert main.main(["run"]) == 0
    [trainjob] = [c for c in built if isinstance(c, TrainJobController)]
    assert trainjob.pod_groups == {VOLCANO_KIND}
    assert VOLCANO_KIND in trainjob._resources
    assert COSCHEDULING_KIND not in trainjob._resources
    assert len(looked_up) == 1
    looked_up.clear()
    built.clear()
    assert main.main(["run", "--enable-scheme", "tfjob"]) == 0
    assert looked_up == []
    assert main.main(["manifests"]) == 0
    assert looked_up == []


def test_the_lookups_wait_on_the_api_server_while_the_other_kinds_are_built(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CRD lookups run on a thread of their own from the start: the v1 kinds' controllers
    are built while they wait for the API server, and only the TrainJob controller waits for
    their answers. Not served, TrainJobs are warned about once the operator's logging is set
    (the warning used to go out before it, in the console format whatever ``--log-format``)."""
    import threading

    import structlog

    import training_operator.__main__ as main
    from jobcontroller import PlanConfig

    tfjob_built = threading.Event()
    seen_while_asking: list[bool] = []
    threads: list[str] = []

    def lookup_crds(
        settings: object, names: list[str], needed: Sequence[str] = ()
    ) -> dict[str, bool | None]:
        threads.append(threading.current_thread().name)
        # An API server slow to answer: the main thread builds the other kinds meanwhile.
        seen_while_asking.append(tfjob_built.wait(timeout=10))
        return {name: name not in main.TRAINJOB_CRDS for name in names}

    original = main.SCHEMES["tfjob"]

    def tfjob(config: PlanConfig, settings: Settings) -> Any:
        built = original(config, settings)
        tfjob_built.set()
        return built

    built: list[Any] = []

    def run(**kwargs: Any) -> int:
        settings = parse_settings(name=main.NAME, argv=kwargs["argv"], add_flags=main._flags)
        built.extend(kwargs["controllers"](PlanConfig(), settings))
        return 0

    monkeypatch.setattr(main, "lookup_crds", lookup_crds)
    monkeypatch.setitem(main.SCHEMES, "tfjob", tfjob)
    monkeypatch.setattr(main, "run_job_operators", run)
    with structlog.testing.capture_logs() as logs:
        assert main.main(["run"]) == 0
    assert seen_while_asking == [True]
    assert threads == ["crd-lookups"]
    assert sorted(type(c).__name__ for c in built) == [
        "JAXJobController",
        "MPIJobController",
        "PaddleJobController",
        "PyTorchJobController",
        "TFJobController",
        "XGBoostJobController",
    ]
    [warning] = [e for e in logs if e["log_level"] == "warning"]
    assert warning["event"].startswith("TrainJobs are not served")
