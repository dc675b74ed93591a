"""The built-in types committed under ``data/``: which API document each comes from, how it is
converted, and loading it back (kubetypes.py says why they are committed).

Kept apart from kubetypes.py, which builds the models' schemas from these files when imported:
``hack/gen-pod-schema.py`` must be able to write them before they exist.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from jobcontroller.api import openapi_schema

__all__ = [
    "DATA_FILES",
    "JOB_TEMPLATE_SPEC",
    "PERSISTENT_VOLUME_CLAIM",
    "converted",
    "data_path",
    "load_data_file",
    "render",
]

JOB_TEMPLATE_SPEC = "io.k8s.api.batch.v1.JobTemplateSpec"
PERSISTENT_VOLUME_CLAIM = "io.k8s.api.core.v1.PersistentVolumeClaim"

#: Committed file -> (the API server's OpenAPI v3 document it is converted from, type name).
DATA_FILES: dict[str, tuple[str, str]] = {
    "jobtemplatespec.json": ("/openapi/v3/apis/batch/v1", JOB_TEMPLATE_SPEC),
    "persistentvolumeclaim.json": ("/openapi/v3/api/v1", PERSISTENT_VOLUME_CLAIM),
}


def converted(openapi: dict[str, Any], data_file: str) -> dict[str, Any]:
    """What ``data/<data_file>`` should hold, from the OpenAPI document it comes from.

    The Job template's pod template is left empty here (it is the base library's pod schema,
    put back by ``kubetypes.job_template_schema``), so the pod schema is committed once.
    """
    _, name = DATA_FILES[data_file]
    schema = openapi_schema(openapi, name)
    if name == JOB_TEMPLATE_SPEC:
        template = schema["properties"]["spec"]["properties"]["template"]
        schema["properties"]["spec"]["properties"]["template"] = {
            "description": template.get("description", "")
        }
    return schema


def render(schema: dict[str, Any]) -> str:
    """The committed text of a schema (as the pod schema's: sorted, one-space indent)."""
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


def data_path(data_file: str) -> Any:
    """The committed file (an importlib Traversable)."""
    return resources.files(__package__).joinpath("data", data_file)


@cache
def _committed(data_file: str) -> str:
    text: str = data_path(data_file).read_text()
    return text


def load_data_file(data_file: str) -> dict[str, Any]:
    """The committed schema ``data/<data_file>`` (a fresh copy each call)."""
    data: dict[str, Any] = json.loads(_committed(data_file))
    return data
