"""jobcontroller.testing: the test kit (a real local cluster, fixtures, simulated pods).

The types its fixtures hand out are re-exported here, so an operator's tests import nothing
private: ``kube`` is a :class:`KubeApi`, its errors are :class:`ApiError`, and a job kind's
API resource is a :class:`Resource`.
"""

from jobcontroller.runtime.kube import ApiError, KubeApi, Resource

__all__ = ["ApiError", "KubeApi", "Resource"]
