"""The committed PodTemplateSpec schema (api/podtemplatespec.json) is what the API server serves.

It is converted from the control plane's OpenAPI v3 document by hack/gen-pod-schema.py; when
the pinned Kubernetes version moves, this fails until the schema (and the CRDs) are
regenerated.
"""

from __future__ import annotations

from typing import Any

from jobcontroller.api.podschema import load_pod_template_schema, pod_template_schema
from jobcontroller.runtime.kube import KubeApi


async def test_committed_pod_schema_matches_the_api_server(kube: KubeApi) -> None:
    openapi: dict[str, Any] = await kube.request("GET", "/openapi/v3/api/v1")
    served = pod_template_schema(openapi)
    assert served == load_pod_template_schema(), (
        "the committed pod template schema has drifted from the API server's: run "
        "`uv run python hack/gen-pod-schema.py && uv run python hack/gen-crds.py`"
    )
