"""Kubeflow-compatible job controller library."""
