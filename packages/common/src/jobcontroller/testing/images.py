"""Container images for the local cluster's real node, built here from Debian packages.

No image registry can be reached from the machines we test on, so every image a real pod needs
is built locally and imported into the node's containerd:

* ``pause``: the pod sandbox, one static binary (``hack/images/pause.c``, built by
  ``hack/build-node.sh``) under the name containerd's CRI asks for;
* ``tools``: Debian minbase with netcat-openbsd, for plain pods and the PyTorch operator's
  init container (its ``nc -z`` loop);
* ``trainer``: Debian's CPU-only frameworks: ``python3-torch`` (1.13, gloo and the c10d
  rendezvous), OpenMPI with ``python3-mpi4py``, and ``openssh-server`` for mpirun;
* ``tensorflow``: Debian's python3.11 with the ``tensorflow-cpu`` wheel from PyPI (Debian has
  no TensorFlow);
* ``xgboost``: Debian's ``python3-xgboost`` (1.7, CPU, with its Python Rabit tracker), for
  the XGBoost runtime and XGBoostJobs (800 MiB: Debian's scipy depends on pythran, hence on
  a C++ toolchain and Boost's headers);
* ``jax``: Debian's python3.11 with the ``jax[cpu]`` wheels from PyPI (Debian has no JAX),
  for the JAX runtime and JAXJobs;
* ``paddle``: Debian's python3.11 with the ``paddlepaddle`` CPU wheel from PyPI (Debian has no
  PaddlePaddle), for PaddleJobs (``paddle.distributed.launch``, gloo on CPU);
* ``operators``: Debian's python3.11 with the project's wheels and their runtime dependencies
  (the distributions the Dockerfile's ``uv sync --no-dev --no-editable`` installs), non-root;
* ``jobset``: the JobSet controller ``hack/build-jobset.sh`` built, alone in the image, named
  as ``manifests/jobset`` names upstream's, non-root.

An image is a Debian root filesystem made by ``mmdebstrap`` (one layer, cached per package
list) plus, for some, a layer of files of ours; both go into an OCI archive that
``ctr images import`` reads. Everything is cached under ``~/.cache/jobcontroller/images`` per
content hash (packages, files and this module's recipe), so a warm build is a few file checks.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["IMAGES", "Image", "build", "cache_dir"]

SUITE = "bookworm"
MIRRORS = (
    f"deb http://deb.debian.org/debian {SUITE} main",
    f"deb http://deb.debian.org/debian {SUITE}-updates main",
    f"deb http://deb.debian.org/debian-security {SUITE}-security main",
)
#: Documentation and translations are left out of every image.
_DPKG_EXCLUDES = (
    "/usr/share/doc/*",
    "/usr/share/man/*",
    "/usr/share/locale/*",
    "/usr/share/info/*",
)
#: Bumped when the recipe changes in a way the hashed inputs do not show.
RECIPE = "3"

LOCAL = "jobcontroller.local"
PAUSE_REF = "registry.k8s.io/pause:3.10"
TOOLS_REF = f"{LOCAL}/tools:local"
TRAINER_REF = f"{LOCAL}/trainer:local"
OPERATORS_REF = f"{LOCAL}/kubeflow-operators-py:local"
TENSORFLOW_REF = f"{LOCAL}/tensorflow:local"
XGBOOST_REF = f"{LOCAL}/xgboost:local"
JAX_REF = f"{LOCAL}/jax:local"
PADDLE_REF = f"{LOCAL}/paddle:local"
#: The JobSet controller under the name manifests/jobset deploys (built here, never pulled).
JOBSET_REF = "registry.k8s.io/jobset/jobset:v0.12.0"
#: TensorFlow is not packaged by Debian: the CPU wheel from PyPI, on Debian's python3.11.
TENSORFLOW_PIN = "tensorflow-cpu==2.21.0"
#: Nor JAX: jax with its CPU jaxlib (whose CPU collectives are gloo's), from PyPI.
JAX_PIN = "jax[cpu]==0.10.2"
#: Nor PaddlePaddle: its CPU wheel (cross-process collectives on gloo), and setuptools, which
#: ``import paddle`` needs (paddle.utils.cpp_extension) but the wheel does not require.
PADDLE_PINS = ("paddlepaddle==3.3.1", "setuptools==84.2.1")


def cache_dir() -> Path:
    base = Path(os.environ.get("JOBCONTROLLER_CACHE", Path.home() / ".cache" / "jobcontroller"))
    return base / "images"


def _log(msg: str) -> None:
    print(f"[images {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Image:
    """One image: Debian packages, files of ours on top, and the image config."""

    name: str
    ref: str
    packages: tuple[str, ...] = ()
    """Debian packages on minbase; empty for an image from scratch."""
    files: Callable[[Path], Iterable[tuple[str, Path]]] | None = None
    """(path in the image, file here) pairs for the top layer, given the repository root."""
    setup: str = ""
    """Shell run in the root filesystem's chroot after the packages (mmdebstrap customize)."""
    config: dict[str, object] = field(default_factory=dict)


def _trainer_setup() -> str:
    # sshd for mpirun: host keys made now, root login by key only (the mpi-operator mounts the
    # job's key pair and authorized_keys at /root/.ssh), no DNS lookups of clients, and the
    # privilege-separation directory a read-only /run would not have.
    # And, as mpi-operator's base image has it (which Trainer v2.3.0's deepspeed and mlx
    # runtime images start from), the non-root way those runtimes run: user mpiuser (uid 1000)
    # whose sshd listens on 2222 with the job's key (mounted at /home/mpiuser/.ssh) as its
    # host key; mpiuser's ssh connects to 2222 (root's keeps 22, for MPIJob's root sshd).
    return "\n".join(
        [
            'chroot "$1" ssh-keygen -A',
            'mkdir -p "$1/run/sshd"',
            "cat >> \"$1/etc/ssh/sshd_config\" <<'EOF'\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nUseDNS no\n"
            "StrictModes no\nEOF",
            "cat >> \"$1/etc/ssh/ssh_config\" <<'EOF'\n"
            "    StrictHostKeyChecking no\n    UserKnownHostsFile /dev/null\n"
            "    LogLevel ERROR\nMatch localuser mpiuser\n    Port 2222\nEOF",
            'chroot "$1" useradd --create-home --uid 1000 mpiuser',
            "cat > \"$1/home/mpiuser/.sshd_config\" <<'EOF'\n"
            "PidFile /home/mpiuser/sshd.pid\nHostKey /home/mpiuser/.ssh/id_rsa\n"
            "StrictModes no\nPort 2222\nPasswordAuthentication no\nUseDNS no\nEOF",
            'chroot "$1" chown mpiuser:mpiuser /home/mpiuser/.sshd_config',
        ]
    )


def _trainer_files(root: Path) -> Iterable[tuple[str, Path]]:
    # sshd's privilege-separation directory: mmdebstrap leaves /run empty in its tarball.
    keep = cache_dir() / "empty"
    keep.parent.mkdir(parents=True, exist_ok=True)
    keep.touch()
    yield "/run/sshd/.keep", keep


def _operator_files(root: Path) -> Iterable[tuple[str, Path]]:
    layer = _operator_site(root)
    for path in sorted(layer.rglob("*")):
        if path.is_file() or path.is_symlink():
            yield f"/{path.relative_to(layer)}", path


def _wheel_files(
    root: Path, *, name: str, pins: tuple[str, ...], target: str
) -> Iterable[tuple[str, Path]]:
    """Wheels from PyPI for Debian's python3.11, installed under ``target`` (cached per pins)."""
    key = hashlib.sha256((RECIPE + " ".join(pins)).encode()).hexdigest()[:16]
    site = cache_dir() / "site" / f"{name}-{key}"
    if not site.exists():
        partial = site.with_name(site.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        uv = shutil.which("uv") or str(root / ".venv-uv" / "bin" / "uv")
        _log(f"installing {' '.join(pins)} for the image")
        subprocess.run(
            [
                uv,
                "pip",
                "install",
                "--quiet",
                "--target",
                str(partial / target.lstrip("/")),
                "--python-version",
                "3.11",
                "--python-platform",
                "x86_64-manylinux_2_28",
                "--compile-bytecode",
                *pins,
            ],
            cwd=root,
            check=True,
        )
        partial.rename(site)
    for path in sorted(site.rglob("*")):
        if path.is_file() or path.is_symlink():
            yield f"/{path.relative_to(site)}", path


def _tensorflow_files(root: Path) -> Iterable[tuple[str, Path]]:
    return _wheel_files(root, name="tensorflow", pins=(TENSORFLOW_PIN,), target="/opt/tf")


def _jax_files(root: Path) -> Iterable[tuple[str, Path]]:
    return _wheel_files(root, name="jax", pins=(JAX_PIN,), target="/opt/jax")


def _paddle_files(root: Path) -> Iterable[tuple[str, Path]]:
    return _wheel_files(root, name="paddle", pins=PADDLE_PINS, target="/opt/paddle")


def _jobset_files(root: Path) -> Iterable[tuple[str, Path]]:
    # The binary hack/build-jobset.sh built from the module, where upstream's image has it.
    from jobcontroller.testing.jobset import find_jobset

    yield "/manager", find_jobset() / "jobset"


IMAGES: dict[str, Image] = {
    "pause": Image(name="pause", ref=PAUSE_REF, config={"Entrypoint": ["/pause"]}),
    "tools": Image(
        name="tools",
        ref=TOOLS_REF,
        packages=("netcat-openbsd", "iproute2", "procps"),
        config={"Cmd": ["/bin/sh"]},
    ),
    "trainer": Image(
        name="trainer",
        ref=TRAINER_REF,
        packages=(
            "python3",
            "python3-torch",
            "python3-numpy",
            "python3-mpi4py",
            "openmpi-bin",
            "openssh-server",
            "openssh-client",
            "netcat-openbsd",
            "procps",
        ),
        setup=_trainer_setup(),
        files=_trainer_files,
        config={
            "Cmd": ["/usr/bin/python3"],
            "Env": ["OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"],
        },
    ),
    "tensorflow": Image(
        name="tensorflow",
        ref=TENSORFLOW_REF,
        packages=("python3",),
        files=_tensorflow_files,
        config={
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PYTHONPATH=/opt/tf",
                "TF_CPP_MIN_LOG_LEVEL=1",
            ],
            "Cmd": ["/usr/bin/python3"],
        },
    ),
    "xgboost": Image(
        name="xgboost",
        ref=XGBOOST_REF,
        packages=("python3", "python3-xgboost"),
        config={"Cmd": ["/usr/bin/python3"]},
    ),
    "jax": Image(
        name="jax",
        ref=JAX_REF,
        packages=("python3",),
        files=_jax_files,
        config={
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PYTHONPATH=/opt/jax",
            ],
            "Cmd": ["/usr/bin/python3"],
        },
    ),
    "paddle": Image(
        name="paddle",
        ref=PADDLE_REF,
        # libgomp: the wheel's libcommon.so and oneDNN link OpenMP's runtime without bundling it.
        packages=("python3", "libgomp1"),
        files=_paddle_files,
        config={
            "Env": [
                "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PYTHONPATH=/opt/paddle",
            ],
            "Cmd": ["/usr/bin/python3"],
        },
    ),
    "jobset": Image(
        name="jobset",
        ref=JOBSET_REF,
        files=_jobset_files,
        # Static (CGO off), so from scratch; upstream's distroless image runs as 65532 too.
        config={"Entrypoint": ["/manager"], "User": "65532:65532"},
    ),
    "operators": Image(
        name="operators",
        ref=OPERATORS_REF,
        packages=("python3",),
        files=_operator_files,
        config={
            "Env": [
                "PATH=/app/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "PYTHONPATH=/app/lib",
                "PYTHONDONTWRITEBYTECODE=1",
                "PYTHONUNBUFFERED=1",
            ],
            "User": "65532:65532",
            "Cmd": ["tf-operator", "run"],
        },
    ),
}


# ------------------------------------------------------------------------------ the rootfs


def _rootfs(image: Image) -> Path:
    """The cached mmdebstrap tarball for ``image``'s packages (built when missing)."""
    key = hashlib.sha256(
        json.dumps([RECIPE, SUITE, MIRRORS, _DPKG_EXCLUDES, image.packages, image.setup]).encode()
    ).hexdigest()[:16]
    out = cache_dir() / "rootfs" / f"{image.name}-{key}.tar"
    if out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    if shutil.which("mmdebstrap") is None:
        raise RuntimeError("mmdebstrap is missing: run hack/build-node.sh (it installs it)")
    partial = out.with_suffix(".partial.tar")
    argv = [
        "mmdebstrap",
        "--variant=minbase",
        "--mode=root",
        "--format=tar",
        "--quiet",
        '--aptopt=Acquire::Retries "5"',
        *(f"--dpkgopt=path-exclude={p}" for p in _DPKG_EXCLUDES),
    ]
    if image.packages:
        argv.append(f"--include={','.join(image.packages)}")
    # Leave apt's lists and caches out of the image.
    hooks = ['rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*']
    if image.setup:
        hooks.insert(0, image.setup)
    script = None
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write("set -e\n" + "\n".join(hooks) + "\n")
        script = f.name
    argv.append(f'--customize-hook=sh {script} "$1"')
    argv += [SUITE, str(partial), *MIRRORS]
    _log(f"mmdebstrap {image.name}: {' '.join(image.packages) or '(minbase)'}")
    started = time.monotonic()
    try:
        subprocess.run(argv, check=True)
    finally:
        os.unlink(script)
    partial.rename(out)
    _log(
        f"rootfs {image.name}: {out.stat().st_size / 2**20:.0f} MiB "
        f"in {time.monotonic() - started:.0f}s"
    )
    return out


# --------------------------------------------------------------------------- the OCI archive


def _sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def _files_layer(entries: Iterable[tuple[str, Path]], dest: Path) -> None:
    """A layer tarball of ``entries``, with reproducible metadata (root-owned, mtime 0)."""
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        seen_dirs: set[str] = set()
        for image_path, source in entries:
            parts = image_path.strip("/").split("/")
            for i in range(1, len(parts)):
                d = "/".join(parts[:i])
                if d not in seen_dirs:
                    seen_dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    tar.addfile(info)
            info = tar.gettarinfo(str(source), arcname="/".join(parts))
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            info.mode = 0o755 if (source.stat().st_mode & 0o111) else 0o644
            if info.isfile():
                with source.open("rb") as f:
                    tar.addfile(info, f)
            else:
                tar.addfile(info)


def _archive(image: Image, layers: list[Path], dest: Path) -> None:
    """Write an OCI image archive (oci-layout, index.json, blobs) of uncompressed layers."""
    blobs: list[tuple[str, int, Path | bytes]] = []
    layer_desc = []
    for layer in layers:
        digest, size = _sha256_file(layer)
        blobs.append((digest, size, layer))
        layer_desc.append(
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": f"sha256:{digest}",
                "size": size,
            }
        )
    config = {
        "architecture": "amd64",
        "os": "linux",
        "config": image.config,
        "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in layer_desc]},
        "history": [{"created_by": f"jobcontroller.testing.images {image.name}"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_digest = hashlib.sha256(config_bytes).hexdigest()
    blobs.append((config_digest, len(config_bytes), config_bytes))
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": f"sha256:{config_digest}",
            "size": len(config_bytes),
        },
        "layers": layer_desc,
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = hashlib.sha256(manifest_bytes).hexdigest()
    blobs.append((manifest_digest, len(manifest_bytes), manifest_bytes))
    index = {
        "schemaVersion": 2,
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": f"sha256:{manifest_digest}",
                "size": len(manifest_bytes),
                "annotations": {
                    "io.containerd.image.name": image.ref,
                    "org.opencontainers.image.ref.name": image.ref.rsplit(":", 1)[1],
                },
            }
        ],
    }

    def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))

    partial = dest.with_suffix(".partial")
    with tarfile.open(partial, "w") as tar:
        add_bytes(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        add_bytes(tar, "index.json", json.dumps(index).encode())
        for digest, size, content in blobs:
            name = f"blobs/sha256/{digest}"
            if isinstance(content, bytes):
                add_bytes(tar, name, content)
            else:
                info = tarfile.TarInfo(name)
                info.size = size
                with content.open("rb") as f:
                    tar.addfile(info, f)
    partial.rename(dest)


def _pause_binary() -> Path:
    explicit = os.environ.get("JOBCONTROLLER_NODE_BIN")
    if explicit:
        return Path(explicit) / "pause"
    found = sorted((Path(cache_dir().parent) / "bin").glob("node-*/pause"))
    if not found:
        raise RuntimeError("the pause binary is missing: run hack/build-node.sh")
    return found[-1]


def build(name: str, *, root: Path) -> Path:
    """The OCI archive of image ``name`` (from the cache when its inputs are unchanged)."""
    image = IMAGES[name]
    layers: list[Path] = []
    extra: list[tuple[str, Path]] = []
    if image.packages:
        layers.append(_rootfs(image))
    if name == "pause":
        extra = [("/pause", _pause_binary())]
    elif image.files is not None:
        extra = list(image.files(root))
    h = hashlib.sha256(json.dumps([RECIPE, image.ref, image.config]).encode())
    for layer in layers:
        h.update(layer.name.encode())
    for image_path, source in extra:
        h.update(image_path.encode())
        h.update(_sha256_file(source)[0].encode())
    out = cache_dir() / f"{name}-{h.hexdigest()[:16]}.oci.tar"
    if out.exists():
        return out
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)  # the first image of a fresh cache (pause)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        if extra:
            top = Path(tmp) / "top.tar"
            _files_layer(extra, top)
            layers.append(top)
        _archive(image, layers, out)
    _log(
        f"image {image.ref}: {out.stat().st_size / 2**20:.0f} MiB "
        f"in {time.monotonic() - started:.0f}s"
    )
    return out


# ----------------------------------------------------------------- the operators' files


def _operator_site(root: Path) -> Path:
    """The operators' runtime, installed for the image's python3.11 (cached per uv.lock and
    package sources): ``/app/lib`` (the distributions) and ``/app/bin`` (console scripts)."""
    h = hashlib.sha256(RECIPE.encode())
    h.update((root / "uv.lock").read_bytes())
    for src in sorted((root / "packages").rglob("*")):
        if (
            src.is_file()
            and "__pycache__" not in src.parts
            and src.suffix in (".py", ".toml", ".yaml", ".typed")
        ):
            h.update(str(src.relative_to(root)).encode())
            h.update(src.read_bytes())
    out = cache_dir() / "site" / h.hexdigest()[:16]
    if out.exists():
        return out
    partial = out.with_name(out.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    lib = partial / "app" / "lib"
    wheels = partial.parent / (out.name + ".wheels")
    shutil.rmtree(wheels, ignore_errors=True)
    uv = shutil.which("uv") or str(root / ".venv-uv" / "bin" / "uv")
    _log("installing the operators and their runtime dependencies for the image")
    reqs = subprocess.run(
        [
            uv,
            "export",
            "--frozen",
            "--no-dev",
            "--no-emit-workspace",
            "--no-hashes",
            "--no-header",
            "--no-annotate",
        ],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    (partial.parent).mkdir(parents=True, exist_ok=True)
    req_file = partial.parent / (out.name + ".requirements.txt")
    req_file.write_text(reqs)
    for member in _runtime_members(uv, root):  # not the test kit (jobcontroller-testing)
        subprocess.run(
            [uv, "build", "--package", member, "--wheel", "--out-dir", str(wheels)],
            cwd=root,
            check=True,
            capture_output=True,
        )
    subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--target",
            str(lib),
            "--python-version",
            "3.11",
            "--python-platform",
            "x86_64-manylinux_2_28",
            "--no-deps",
            "--compile-bytecode",
            "-r",
            str(req_file),
            *map(str, sorted(wheels.glob("*.whl"))),
        ],
        cwd=root,
        check=True,
    )
    bin_dir = partial / "app" / "bin"
    bin_dir.mkdir(parents=True)
    for entry_points in lib.glob("*.dist-info/entry_points.txt"):
        section = ""
        for line in entry_points.read_text().splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "console_scripts" and "=" in line:
                script, target = (p.strip() for p in line.split("=", 1))
                module, _, func = target.partition(":")
                path = bin_dir / script
                path.write_text(
                    "#!/usr/bin/python3\nimport sys\n"
                    f"from {module} import {func.split('.')[0]}\n"
                    f"sys.exit({func}())\n"
                )
                path.chmod(0o755)
    shutil.rmtree(wheels, ignore_errors=True)
    req_file.unlink()
    partial.rename(out)
    return out


def _runtime_members(uv: str, root: Path) -> list[str]:
    """The workspace packages the operators need at run time (what `uv sync --no-dev` installs,
    as the Dockerfile does)."""
    exported = subprocess.run(
        [uv, "export", "--frozen", "--no-dev", "--no-hashes", "--no-header", "--no-annotate"],
        cwd=root,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    members = []
    for line in exported.splitlines():
        if line.startswith("-e "):
            text = (root / line[3:].strip() / "pyproject.toml").read_text()
            match = re.search(r'^name\s*=\s*"([^"]+)"', text, re.M)
            if match:
                members.append(match.group(1))
    return sorted(members)


def operator_distributions(root: Path) -> set[str]:
    """Normalised names of the distributions in the operators image's /app/lib."""
    lib = _operator_site(root) / "app" / "lib"
    names = set()
    for d in lib.glob("*.dist-info"):
        names.add(d.name.removesuffix(".dist-info").rsplit("-", 1)[0].lower().replace("_", "-"))
    return names
