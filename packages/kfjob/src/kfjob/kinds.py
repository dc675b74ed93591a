"""The job kinds kfjob knows, each with the operator that serves it.

A kind's controller is built exactly as its operator's ``main`` builds it: the operator's own
flags parsed with :func:`jobcontroller.runtime.flags.parse_settings` (defaults, or the flags
given after ``--`` to ``kfjob render``), turned into a :class:`PlanConfig` by the operator's
:func:`jobcontroller.plan_config`, and given to the same controller factory. Render therefore
plans with the settings a freshly started operator would have.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from jax_operator.api import JAXJob
from jax_operator.controller import JAXJobController
from jobcontroller import JobController, PlanConfig, Settings, add_job_flags, plan_config
from jobcontroller.api import JobModel
from jobcontroller.runtime.flags import parse_settings
from mpi_operator.api import MPIJob
from mpi_operator.controller import MPIJobController
from paddle_operator.api import PaddleJob
from paddle_operator.controller import PaddleJobController
from pytorch_operator.__main__ import add_flags as add_pytorch_flags
from pytorch_operator.__main__ import build_controller as build_pytorch_controller
from pytorch_operator.api import PyTorchJob
from tf_operator.api import TFJob
from tf_operator.controller import TFJobController
from xgboost_operator.api import XGBoostJob
from xgboost_operator.controller import XGBoostJobController

__all__ = ["KINDS", "JobKind", "UnknownKind", "kind_for", "kind_of_document"]

Factory = Callable[[PlanConfig, Settings], JobController[Any]]


@dataclass(frozen=True, slots=True)
class JobKind:
    """One served kind: its model, its operator's name, flags and controller factory."""

    model: type[JobModel[Any]]
    operator: str
    factory: Factory
    add_flags: Callable[[argparse.ArgumentParser], None] | None = None

    @property
    def kind(self) -> str:
        return self.model.KIND

    @property
    def api_version(self) -> str:
        return self.model.api_version_string()

    @property
    def group(self) -> str:
        return self.model.GROUP

    @property
    def version(self) -> str:
        return self.model.VERSION

    @property
    def plural(self) -> str:
        return self.model.PLURAL

    def controller(self, operator_args: Sequence[str] = ()) -> JobController[Any]:
        """The controller as ``<operator> run <operator_args>`` builds it (no cluster needed:
        with ``--gang-scheduler-name`` the PodGroup CRD is assumed installed, as the operator
        assumes when it cannot look)."""
        settings = parse_settings(
            name=self.operator, argv=list(operator_args), add_flags=self._flags
        )
        return self.factory(plan_config(settings), settings)

    def _flags(self, parser: argparse.ArgumentParser) -> None:
        add_job_flags(parser)
        if self.add_flags is not None:
            self.add_flags(parser)


def _simple(cls: Callable[..., JobController[Any]]) -> Factory:
    def build(config: PlanConfig, settings: Settings) -> JobController[Any]:
        return cls(config=config)

    return build


KINDS: tuple[JobKind, ...] = (
    JobKind(TFJob, "tf-operator", _simple(TFJobController)),
    JobKind(PyTorchJob, "pytorch-operator", build_pytorch_controller, add_pytorch_flags),
    JobKind(MPIJob, "mpi-operator", _simple(MPIJobController)),
    JobKind(XGBoostJob, "xgboost-operator", _simple(XGBoostJobController)),
    JobKind(PaddleJob, "paddle-operator", _simple(PaddleJobController)),
    JobKind(JAXJob, "jax-operator", _simple(JAXJobController)),
)


class UnknownKind(ValueError):
    """A document of a kind (or an apiVersion of it) that no operator here serves."""


def kind_for(name: str) -> JobKind:
    """The kind named ``name``, case-insensitively, by kind, plural or short name
    (``tfjob``, ``tfjobs``, ``TFJob``)."""
    wanted = name.lower()
    for k in KINDS:
        names = {k.kind.lower(), k.plural, k.model.SINGULAR, *k.model.SHORT_NAMES}
        if wanted in names:
            return k
    raise UnknownKind(f"unknown job kind {name!r}; kfjob knows {', '.join(k.kind for k in KINDS)}")


def kind_of_document(doc: dict[str, Any]) -> JobKind:
    """The kind of a job manifest, checking its apiVersion is the one served."""
    kind, api_version = str(doc.get("kind") or ""), str(doc.get("apiVersion") or "")
    for k in KINDS:
        if k.kind == kind:
            if api_version != k.api_version:
                raise UnknownKind(
                    f"{api_version or '(no apiVersion)'} {kind} is not served: "
                    f"{k.operator} serves {k.api_version} {kind}"
                )
            return k
    raise UnknownKind(
        f"{kind or '(no kind)'} is not a job kind kfjob knows "
        f"({', '.join(f'{k.api_version} {k.kind}' for k in KINDS)})"
    )
