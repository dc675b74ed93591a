"""Where the control-plane binaries are.

They are built from source by ``hack/build-control-plane.sh`` into a per-version directory under
``~/.cache/jobcontroller/bin`` (no release binary can be downloaded on the machines we test on).
``JOBCONTROLLER_K8S_BIN`` points at a directory that holds them instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

NAMES = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "etcd", "kwok")
ENV_VAR = "JOBCONTROLLER_K8S_BIN"


class BinariesNotFound(RuntimeError):
    """The control-plane binaries are not built yet."""


@dataclass(frozen=True)
class Binaries:
    directory: Path

    def __getitem__(self, name: str) -> str:
        return str(self.directory / name)


def _complete(directory: Path) -> bool:
    return all(os.access(directory / n, os.X_OK) for n in NAMES)


def find_binaries() -> Binaries:
    """The binaries from ``$JOBCONTROLLER_K8S_BIN``, else the newest complete cached build."""
    explicit = os.environ.get(ENV_VAR)
    if explicit:
        path = Path(explicit).expanduser()
        if not _complete(path):
            raise BinariesNotFound(f"{ENV_VAR}={explicit} lacks one of {', '.join(NAMES)}")
        return Binaries(path)
    cache = Path(os.environ.get("JOBCONTROLLER_CACHE", Path.home() / ".cache" / "jobcontroller"))
    candidates = sorted(
        (d for d in (cache / "bin").glob("k8s-*") if d.is_dir() and _complete(d)),
        key=lambda d: d.stat().st_mtime,
        reverse=True,
    )
    if not candidates:
        raise BinariesNotFound(
            f"no control-plane binaries in {cache / 'bin'}: run hack/build-control-plane.sh "
            f"(or `make control-plane`), or set {ENV_VAR}"
        )
    return Binaries(candidates[0])
