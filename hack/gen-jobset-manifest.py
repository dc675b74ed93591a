"""Write manifests/jobset/upstream.yaml: JobSet's own install (its module's ``config/default``,
rendered by kustomize) at the version hack/build-jobset.sh pins.

uv run python hack/gen-jobset-manifest.py           # regenerate
uv run python hack/gen-jobset-manifest.py --check   # exit 1 if the committed file has drifted

The module's config comes from the JobSet build (``jobcontroller.testing.jobset.find_jobset``,
which runs hack/build-jobset.sh when the cache lacks it); kustomize is the control plane's
kubectl (``kubectl kustomize``). Our choices are applied on top of it by
manifests/jobset/kustomization.yaml, not here, so this file stays upstream's exact rendering.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from pathlib import Path

from jobcontroller.testing.binaries import find_binaries
from jobcontroller.testing.jobset import find_jobset

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "manifests" / "jobset" / "upstream.yaml"


def pinned_version() -> str:
    """JOBSET_VERSION as hack/build-jobset.sh pins it."""
    script = (ROOT / "hack" / "build-jobset.sh").read_text()
    found = re.search(r"^JOBSET_VERSION=\$\{JOBSET_VERSION:-([0-9.]+)\}$", script, re.MULTILINE)
    if found is None:
        raise SystemExit("hack/build-jobset.sh: no JOBSET_VERSION line")
    return found.group(1)


def rendered() -> str:
    version = pinned_version()
    build = find_jobset()
    if build.name != f"jobset-{version}":
        raise SystemExit(f"the JobSet build found is {build}, not jobset-{version}")
    kubectl = find_binaries()["kubectl"]
    done = subprocess.run(
        [kubectl, "kustomize", str(build / "config" / "default")],
        capture_output=True,
        text=True,
        check=True,
    )
    header = (
        f"# JobSet v{version}'s own install: `kubectl kustomize config/default` of module\n"
        f"# sigs.k8s.io/jobset@v{version}, written by hack/gen-jobset-manifest.py; do not edit.\n"
        "# manifests/jobset/kustomization.yaml applies our choices on top (docs/jobset.md).\n"
    )
    return header + done.stdout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true", help="report drift instead of writing")
    args = parser.parse_args(argv)
    text = rendered()
    current = OUT.read_text() if OUT.exists() else ""
    if current == text:
        return 0
    if not args.check:
        OUT.parent.mkdir(parents=True, exist_ok=True)
        OUT.write_text(text)
        print(f"wrote {OUT}")
        return 0
    diff = difflib.unified_diff(
        current.splitlines(keepends=True),
        text.splitlines(keepends=True),
        fromfile=str(OUT),
        tofile=f"{OUT} (generated)",
    )
    sys.stdout.writelines(list(diff)[:200])
    print(f"{OUT} is out of date: run `uv run python hack/gen-jobset-manifest.py`")
    return 1


if __name__ == "__main__":
    sys.exit(main())
