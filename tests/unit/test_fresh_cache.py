"""First runs on a machine that never built anything: every build step creates what it writes
into. A fresh machine has no ``~/.cache`` at all; ``JOBCONTROLLER_CACHE`` points the test kit
at a directory that does not exist yet, so this path runs in every ``make test``.

(The control plane's build script on an empty cache: tests/unit/test_go_bootstrap.py.)
"""

from __future__ import annotations

import json
import shutil
import tarfile
from pathlib import Path

import pytest

from jobcontroller.testing import images

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "no-such-dir" / "jobcontroller"
    monkeypatch.setenv("JOBCONTROLLER_CACHE", str(cache))
    # The node's pause binary comes from hack/build-node.sh; the image build only packs it, so
    # any executable stands in for it here (the real one is built by the conformance run).
    node_bin = tmp_path / "node-bin"
    node_bin.mkdir()
    shutil.copy("/bin/true", node_bin / "pause")
    monkeypatch.setenv("JOBCONTROLLER_NODE_BIN", str(node_bin))
    assert not cache.exists()
    return cache


def test_the_first_image_builds_into_a_cache_that_does_not_exist_yet(fresh_cache: Path) -> None:
    # pause is the first image the node needs and has no Debian layer whose build would have
    # made the directory (a fresh machine's `make cluster-up REAL_NODE=1` failed exactly here).
    archive = images.build("pause", root=ROOT)
    assert archive.is_file()
    assert archive.parent == fresh_cache / "images"
    with tarfile.open(archive) as tar:
        index = json.load(tar.extractfile("index.json"))  # type: ignore[arg-type]
        names = tar.getnames()
    assert index["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"]
    assert "oci-layout" in names
    # No temporary directory left beside it.
    assert sorted(p.name for p in archive.parent.iterdir()) == [archive.name]


def test_a_cached_image_is_reused_not_rebuilt(fresh_cache: Path) -> None:
    first = images.build("pause", root=ROOT)
    stamp = first.stat().st_mtime_ns
    again = images.build("pause", root=ROOT)
    assert again == first
    assert again.stat().st_mtime_ns == stamp
