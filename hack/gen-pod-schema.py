"""Regenerate the CRDs' PodTemplateSpec schema from the local control plane's API server.

uv run python hack/gen-pod-schema.py           # start a control plane, write the schema
uv run python hack/gen-pod-schema.py --check   # exit 1 if the committed schema has drifted

Then `uv run python hack/gen-crds.py` to put it into the CRD manifests. The control plane's
version is the one `hack/build-control-plane.sh` pins; the schema follows it when it moves.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from jobcontroller.api import podschema
from jobcontroller.runtime.kube import KubeApi
from jobcontroller.testing.controlplane import ControlPlane

TARGET = Path(podschema.__file__).with_name(podschema.SCHEMA_FILE)


def render(schema: dict[str, Any]) -> str:
    return json.dumps(schema, indent=1, sort_keys=True) + "\n"


async def served(kubeconfig: Path) -> dict[str, Any]:
    kube = await KubeApi.from_config(kubeconfig=str(kubeconfig))
    try:
        openapi: dict[str, Any] = await kube.request("GET", "/openapi/v3/api/v1")
        return openapi
    finally:
        await kube.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    with ControlPlane() as plane:
        openapi = asyncio.run(served(plane.kubeconfig))
    text = render(podschema.pod_template_schema(openapi))
    current = TARGET.read_text() if TARGET.exists() else ""
    if current == text:
        print(f"{TARGET} is up to date")
        return 0
    if args.check:
        print(f"{TARGET} differs from what the API server serves: run hack/gen-pod-schema.py")
        return 1
    TARGET.write_text(text)
    print(f"wrote {TARGET} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
