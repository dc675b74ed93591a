"""The images built here stay in step with what real registries get from the Dockerfile."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tarfile
from pathlib import Path

from jobcontroller.testing import images

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_operators_image_installs_the_dockerfiles_distributions() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    # What the Dockerfile installs: the lock's runtime dependencies and the workspace packages,
    # as wheels (its two `uv sync` steps).
    assert "uv sync --frozen --no-dev --no-install-workspace" in dockerfile
    assert "uv sync --frozen --no-dev --no-editable" in dockerfile
    uv = shutil.which("uv") or str(ROOT / ".venv-uv" / "bin" / "uv")
    exported = subprocess.run(
        [uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-header", "--no-annotate"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    expected = set()
    for line in exported.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("-e "):  # a workspace member, installed as a wheel in the image
            member = Path(ROOT / line[3:].strip())
            text = (member / "pyproject.toml").read_text()
            expected.add(_norm(re.search(r'^name\s*=\s*"([^"]+)"', text, re.M).group(1)))  # type: ignore[union-attr]
        else:
            expected.add(_norm(re.split(r"[=<>; ]", line, maxsplit=1)[0]))
    assert {_norm(n) for n in images.operator_distributions(ROOT)} == expected
    # The test kit stays out of production: not its distribution, not its files.
    assert "jobcontroller-testing" not in expected
    lib = images._operator_site(ROOT) / "app" / "lib"
    assert (lib / "jobcontroller" / "controller" / "base.py").is_file()
    assert not (lib / "jobcontroller" / "testing").exists()


def test_operators_image_runs_as_non_root_with_the_console_scripts() -> None:
    archive = images.build("operators", root=ROOT)
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        digest = index["manifests"][0]["digest"].split(":")[1]
        manifest = json.load(tar.extractfile(f"blobs/sha256/{digest}"))  # type: ignore[arg-type]
        config_digest = manifest["config"]["digest"].split(":")[1]
        config = json.load(tar.extractfile(f"blobs/sha256/{config_digest}"))  # type: ignore[arg-type]
        top = manifest["layers"][-1]["digest"].split(":")[1]
        with tarfile.open(fileobj=tar.extractfile(f"blobs/sha256/{top}")) as layer:
            scripts = {m.name for m in layer.getmembers() if m.name.startswith("app/bin/")}
    assert index["manifests"][0]["annotations"]["io.containerd.image.name"] == images.OPERATORS_REF
    assert config["config"]["User"] == "65532:65532"
    assert scripts >= {
        "app/bin/tf-operator",
        "app/bin/pytorch-operator",
        "app/bin/mpi-operator",
        "app/bin/xgboost-operator",
        "app/bin/paddle-operator",
        "app/bin/jax-operator",
        "app/bin/training-operator",
    }
