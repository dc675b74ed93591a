"""``kfjob migrate``: a v1 PyTorchJob, JAXJob, XGBoostJob or MPIJob as the Kubeflow Trainer
v2.3.0 TrainJob (and, where no shipped runtime fits, TrainingRuntime) doing the same.

:func:`migrate` maps one job (frameworks.py dispatches per kind; common.py holds the rules the
single-pod-set kinds share); :mod:`kfjob.migrate.check` renders both sides offline with the
operators' own planners and compares their pods.
"""

from kfjob.migrate.base import MigrateError, Migration
from kfjob.migrate.frameworks import FRAMEWORKS, migrate

__all__ = ["FRAMEWORKS", "MigrateError", "Migration", "migrate"]
