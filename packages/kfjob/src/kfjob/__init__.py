"""kfjob: a Python SDK and CLI for Kubeflow training jobs.

``JobClient`` (the SDK, on the synchronous ``kubernetes`` client) and ``render`` (offline: the
objects an operator creates for a job, from the operator's own planner). The ``kfjob`` command
(:mod:`kfjob.cli`) is built on them.
"""

from kfjob.client import ApiFailure, JobClient, JobFailedError, Progress, job_state
from kfjob.kinds import KINDS, JobKind, kind_for
from kfjob.render import Rendered, RenderError, render_job, render_text

__all__ = [
    "KINDS",
    "ApiFailure",
    "JobClient",
    "JobFailedError",
    "JobKind",
    "Progress",
    "RenderError",
    "Rendered",
    "job_state",
    "kind_for",
    "render_job",
    "render_text",
]
