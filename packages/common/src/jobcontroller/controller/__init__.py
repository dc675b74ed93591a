"""``JobController``, the base class a framework operator subclasses, and its parts."""

from jobcontroller.controller.base import LABEL_JOB_NAME, JobController, pod_group_resource

__all__ = ["LABEL_JOB_NAME", "JobController", "pod_group_resource"]
