"""Regenerate the CRDs' built-in Kubernetes schemas from the local control plane's API server.

uv run python hack/gen-pod-schema.py           # start a control plane, write the schemas
uv run python hack/gen-pod-schema.py --check   # exit 1 if a committed schema has drifted

Writes the pod template schema of every job kind (jobcontroller/api/podtemplatespec.json) and
the Job template and PersistentVolumeClaim schemas the trainer API embeds
(trainer_operator/data/). Then `uv run python hack/gen-crds.py` to put them into the CRD
manifests. The control plane's version is the one `hack/build-control-plane.sh` pins; the
schemas follow it when it moves.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from jobcontroller.api import podschema
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.controlplane import ControlPlane
from trainer_operator import kubedata

TARGET = Path(podschema.__file__).with_name(podschema.SCHEMA_FILE)
TRAINER_DATA = Path(kubedata.__file__).with_name("data")


def render(schema: dict[str, Any]) -> str:
    return kubedata.render(schema)


async def served(kubeconfig: Path, paths: set[str]) -> dict[str, dict[str, Any]]:
    """The OpenAPI v3 documents at ``paths``, by path."""
    kube = await KubeApi.from_config(kubeconfig=str(kubeconfig))
    try:
        return {path: await kube.request("GET", path) for path in sorted(paths)}
    finally:
        await kube.close()


def expected(documents: dict[str, dict[str, Any]]) -> dict[Path, str]:
    """Every committed schema file with the text it should have."""
    out = {TARGET: render(podschema.pod_template_schema(documents["/openapi/v3/api/v1"]))}
    for name, (document, _) in kubedata.DATA_FILES.items():
        out[TRAINER_DATA / name] = render(kubedata.converted(documents[document], name))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    paths = {"/openapi/v3/api/v1", *(doc for doc, _ in kubedata.DATA_FILES.values())}
    with ControlPlane() as plane:
        documents = asyncio.run(served(plane.kubeconfig, paths))
    drifted = 0
    for target, text in expected(documents).items():
        current = target.read_text() if target.exists() else ""
        if current == text:
            print(f"{target} is up to date")
            continue
        if args.check:
            print(f"{target} differs from what the API server serves: run hack/gen-pod-schema.py")
            drifted += 1
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
        print(f"wrote {target} ({len(text)} bytes)")
    return 1 if drifted else 0


if __name__ == "__main__":
    sys.exit(main())
