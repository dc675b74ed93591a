"""The Job template and PersistentVolumeClaim schemas committed for the trainer CRDs
(trainer_operator/data/) are what the local control plane's API server serves, and the CRDs are
stored as written.

hack/gen-pod-schema.py converts them from the API server's OpenAPI v3 documents; when the pinned
Kubernetes version moves, this fails until they (and the CRDs) are regenerated.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from jobcontroller.runtime.kube import CRDS, KubeApi
from trainer_operator.kubedata import DATA_FILES, converted, load_data_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("data_file", sorted(DATA_FILES))
async def test_committed_schema_matches_the_api_server(kube: KubeApi, data_file: str) -> None:
    document, _ = DATA_FILES[data_file]
    openapi: dict[str, Any] = await kube.request("GET", document)
    assert converted(openapi, data_file) == load_data_file(data_file), (
        f"trainer_operator/data/{data_file} has drifted from the API server's: run "
        "`uv run python hack/gen-pod-schema.py && uv run python hack/gen-crds.py`"
    )


@pytest.mark.parametrize("plural", ["trainjobs", "trainingruntimes", "clustertrainingruntimes"])
async def test_the_api_server_stores_the_crds_as_written(
    kube: KubeApi, kubeflow_crds: list[str], plural: str
) -> None:
    """Nothing in a committed CRD is normalised away when stored (an empty ``properties`` of
    a field-less policy was): a server-side re-apply of the manifests then meets no conflict."""
    path = ROOT / "manifests" / "base" / "crds" / f"trainer.kubeflow.org_{plural}.yaml"
    written = yaml.safe_load(path.read_text())
    stored = await kube.get(CRDS, written["metadata"]["name"])
    stored["spec"].pop("conversion", None)  # the API server's default, None
    assert stored["spec"] == written["spec"]
