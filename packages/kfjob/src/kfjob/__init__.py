"""kfjob: a Python SDK and CLI for Kubeflow training jobs."""
