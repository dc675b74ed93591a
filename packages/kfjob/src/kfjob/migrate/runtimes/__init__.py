"""The ClusterTrainingRuntimes the default install ships (manifests/runtimes, the xgboost image
with the tag its kustomization gives it), as package data: ``kfjob migrate`` copies one when a
v1 job needs a TrainingRuntime of its own, and ``--check`` plans TrainJobs on them offline.
tests/unit/test_kfjob_migrate_runtimes.py keeps these copies equal to the manifests."""

from __future__ import annotations

import copy
from functools import cache
from importlib import resources
from typing import Any

import yaml

__all__ = ["FILES", "shipped_runtime"]

#: Runtime name -> its file here (and in manifests/runtimes).
FILES = {
    "torch-distributed": "torch_distributed.yaml",
    "jax-distributed": "jax_distributed.yaml",
    "xgboost-distributed": "xgboost_distributed.yaml",
}


@cache
def _load(name: str) -> dict[str, Any]:
    text = resources.files(__name__).joinpath(FILES[name]).read_text()
    [doc] = [d for d in yaml.safe_load_all(text) if d]
    return dict(doc)


def shipped_runtime(name: str) -> dict[str, Any]:
    """A fresh copy of the shipped ClusterTrainingRuntime ``name``."""
    return copy.deepcopy(_load(name))
