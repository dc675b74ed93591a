"""The framework hooks are one typed base class: a hook an operator marks ``@override`` that the
base lacks (a typo, which would never be called) is refused when the class is defined, and an
operator without its success rule (``update_status``) cannot be built."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping

import pytest

from jobcontroller import Event, JobController, ReplicaPods, override
from jobcontroller.api import JobStatus
from tf_operator.api import TFJob
from tf_operator.controller import TFJobController


def test_a_misspelt_hook_marked_override_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match=r"set_cluster_specs is marked @override"):

        class Typo(TFJobController):
            @override
            def set_cluster_specs(self, job: TFJob) -> None:  # the hook is set_cluster_spec
                pass


def test_a_correctly_named_override_is_accepted() -> None:
    class Tolerant(TFJobController):
        @override
        def tolerated(self, job: TFJob) -> list[str]:
            return ["everything"]

    job = TFJob.parse({"metadata": {"name": "t"}, "spec": {"tfReplicaSpecs": {}}})
    assert Tolerant().tolerated(job) == ["everything"]


def test_an_operator_without_its_success_rule_cannot_be_built() -> None:
    class NoRule(JobController[TFJob]):
        model = TFJob
        framework_name = "tensorflow"
        controller_name = "tfjob-controller"

    with pytest.raises(TypeError, match="update_status"):
        NoRule()  # type: ignore[abstract]  # what mypy reports too

    class WithRule(NoRule):
        @override
        def update_status(
            self,
            job: TFJob,
            status: JobStatus,
            *,
            replicas: Mapping[str, ReplicaPods],
            now: dt.datetime,
        ) -> list[Event]:
            return []

    assert WithRule().kind == "TFJob"
