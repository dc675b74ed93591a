"""YAML reading for the test kit and the tests: libyaml's C loader when PyYAML was built with it.

A CRD of ours is about 700 KB of YAML and an overlay rendered by kustomize holds six of them;
the pure-Python loader takes about a second per CRD, the C one a tenth of that. Same results:
both are the safe loader.
"""

from __future__ import annotations

from typing import Any

import yaml

__all__ = ["load", "load_all"]

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    """One document, as ``yaml.safe_load``."""
    return yaml.load(text, Loader=_LOADER)


def load_all(text: str) -> list[Any]:
    """Every non-empty document, as ``yaml.safe_load_all`` without the empty ones."""
    return [doc for doc in yaml.load_all(text, Loader=_LOADER) if doc]
