"""hack/ensure-go.sh: a machine without Go (or with an older one) gets a verified toolchain.

The script runs for real against a proxy on 127.0.0.1 that serves a small fake toolchain zip laid
out like the module proxy's golang.org/toolchain zips and counts the requests it gets; PATH holds
only the few tools the script needs (and a fake `go` where a test says so), so the machine's own
Go never takes part.
"""

from __future__ import annotations

import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import threading
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).parents[2]
HACK = ROOT / "hack"
BASH = shutil.which("bash") or "/bin/bash"


def _load_ensure_go() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ensure_go", HACK / "ensure_go.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("ensure_go", module)
    spec.loader.exec_module(module)
    return module


ENSURE_GO = _load_ensure_go()
ENV = ENSURE_GO.read_env(HACK / "control-plane.env")
VERSION = ENV["GO_VERSION"]
PLATFORM = ENSURE_GO.host_platform(ENV["GO_MIN"])
MODULE_VERSION = f"v0.0.1-go{VERSION}.{PLATFORM}"
ZIP_NAME = f"{MODULE_VERSION}.zip"
ZIP_PATH = f"/golang.org/toolchain/@v/{ZIP_NAME}"

# Enough of the go command for ensure-go.sh's check and for hack/build-control-plane.sh.
FAKE_TOOLCHAIN_GO = f"""#!/bin/sh
root=${{0%/bin/go}}
[ -n "$FAKE_GO_LOG" ] && echo "$0 $*" >> "$FAKE_GO_LOG"
case "$1" in
  version) echo "go version go{VERSION} {PLATFORM.replace("-", "/")}" ;;
  env) case "$2" in GOROOT) echo "$root" ;; GOVERSION) echo "go{VERSION}" ;; esac ;;
  build) while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done
         printf '#!/bin/sh\\necho fake %s\\n' "${{out##*/}}" > "$out"; chmod +x "$out" ;;
  install) for a in "$@"; do last=$a; done; name=${{last%@*}}; name=${{name##*/}}
           printf '#!/bin/sh\\necho fake %s\\n' "$name" > "$GOBIN/$name"; chmod +x "$GOBIN/$name" ;;
esac
"""


def fake_toolchain_zip() -> bytes:
    """A toolchain zip as the proxy lays it out, every entry without file modes."""
    prefix = f"golang.org/toolchain@{MODULE_VERSION}/"
    tool_dir = PLATFORM.replace("-", "_")
    files = {
        "VERSION": f"go{VERSION}\ntime 2026-08-28T16:20:00Z\n",
        "bin/go": FAKE_TOOLCHAIN_GO,
        "bin/gofmt": "#!/bin/sh\n",
        f"pkg/tool/{tool_dir}/compile": "#!/bin/sh\n",
        "src/runtime/runtime.go": "package runtime\n",
    }
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, text in files.items():
            info = zipfile.ZipInfo(prefix + name, date_time=(2026, 8, 28, 16, 20, 0))
            info.external_attr = 0  # no modes, as the proxy's zips may have
            zf.writestr(info, text)
    return buf.getvalue()


ZIP = fake_toolchain_zip()
ZIP_SHA = hashlib.sha256(ZIP).hexdigest()


@dataclass
class Proxy:
    url: str
    requests: list[str] = field(default_factory=list)


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    served = {ZIP_PATH: ZIP}
    lock = threading.Lock()
    box: list[Proxy] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            with lock:
                box[0].requests.append(self.path)
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.send_header("Content-Length", str(len(body or b"")))
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.append(Proxy(url=f"http://127.0.0.1:{server.server_address[1]}"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box[0]
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    """A PATH directory with only what ensure-go.sh runs: bash, dirname, python3."""
    d = tmp_path / "tools"
    d.mkdir()
    for name, target in (
        ("bash", BASH),
        ("dirname", shutil.which("dirname")),
        ("python3", os.path.realpath(sys.executable)),
    ):
        assert target is not None, f"{name} not found"
        (d / name).symlink_to(target)
    return d


def write_pins(path: Path, sha: str, name: str = ZIP_NAME) -> Path:
    path.write_text(f"# test table\n{sha}  {name}\n")
    return path


def fake_go_on_path(tmp_path: Path, version: str) -> Path:
    d = tmp_path / f"go-{version}" / "bin"
    d.mkdir(parents=True)
    go = d / "go"
    go.write_text(f'#!/bin/sh\necho "go version {version} linux/amd64"\n')
    go.chmod(0o755)
    return d


def run_ensure(
    tmp_path: Path, proxy: Proxy, path: list[Path], *, pins: Path, goproxy: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": os.pathsep.join(str(p) for p in path),
        "HOME": str(tmp_path / "home"),
        "JOBCONTROLLER_CACHE": str(tmp_path / "cache"),
        "JOBCONTROLLER_GO_PINS": str(pins),
        "GOPROXY": goproxy if goproxy is not None else f"{proxy.url},direct",
    }
    return subprocess.run(
        [BASH, str(HACK / "ensure-go.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def installed(tmp_path: Path) -> Path:
    return tmp_path / "cache" / "go" / f"go{VERSION}.{PLATFORM}"


def test_checksum_mismatch_is_refused_and_leaves_nothing(
    tmp_path: Path, proxy: Proxy, tools: Path
) -> None:
    pins = write_pins(tmp_path / "pins", hashlib.sha256(b"another zip").hexdigest())
    proc = run_ensure(tmp_path, proxy, [tools], pins=pins)
    assert proc.returncode != 0
    assert "checksum mismatch" in proc.stderr and ZIP_SHA in proc.stderr, proc.stderr
    assert proc.stdout == ""
    assert proxy.requests == [ZIP_PATH]  # it did fetch, then refused what it got
    assert not (tmp_path / "cache").exists(), list((tmp_path / "cache").rglob("*"))


def test_missing_go_is_fetched_verified_unpacked_then_reused_offline(
    tmp_path: Path, proxy: Proxy, tools: Path
) -> None:
    pins = write_pins(tmp_path / "pins", ZIP_SHA)
    # The go command's list syntax: "direct" is skipped, the first proxy is used.
    proc = run_ensure(tmp_path, proxy, [tools], pins=pins, goproxy=f"direct|{proxy.url}/,off")
    assert proc.returncode == 0, proc.stderr
    bindir = installed(tmp_path) / "bin"
    assert proc.stdout.splitlines()[-1] == str(bindir)
    assert proxy.requests == [ZIP_PATH]
    go = bindir / "go"
    assert os.access(go, os.X_OK) and os.access(bindir / "gofmt", os.X_OK)
    tool_dir = installed(tmp_path) / "pkg" / "tool" / PLATFORM.replace("-", "_")
    assert os.access(tool_dir / "compile", os.X_OK)
    assert not os.access(installed(tmp_path) / "VERSION", os.X_OK)
    out = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == str(installed(tmp_path))
    assert sorted(p.name for p in (tmp_path / "cache" / "go").iterdir()) == [
        installed(tmp_path).name
    ]

    again = run_ensure(tmp_path, proxy, [tools], pins=pins)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[-1] == str(bindir)
    assert proxy.requests == [ZIP_PATH]  # no second request: the cache was used


def test_new_enough_go_on_path_is_used_as_is(tmp_path: Path, proxy: Proxy, tools: Path) -> None:
    newer = fake_go_on_path(tmp_path, "go1.26.9")
    proc = run_ensure(tmp_path, proxy, [newer, tools], pins=write_pins(tmp_path / "pins", ZIP_SHA))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(newer.resolve())
    assert proxy.requests == []
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize("old", ["go1.25.3", "go1.26rc1"])
def test_older_go_on_path_gets_the_pinned_toolchain(
    tmp_path: Path, proxy: Proxy, tools: Path, old: str
) -> None:
    older = fake_go_on_path(tmp_path, old)
    proc = run_ensure(tmp_path, proxy, [older, tools], pins=write_pins(tmp_path / "pins", ZIP_SHA))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == str(installed(tmp_path) / "bin")
    assert "older than" in proc.stderr
    assert proxy.requests == [ZIP_PATH]


def test_platform_without_a_pin_is_refused_before_any_request(
    tmp_path: Path, proxy: Proxy, tools: Path
) -> None:
    pins = write_pins(tmp_path / "pins", ZIP_SHA, name=f"v0.0.1-go{VERSION}.plan9-386.zip")
    proc = run_ensure(tmp_path, proxy, [tools], pins=pins)
    assert proc.returncode != 0
    assert f"no pinned SHA-256 for {ZIP_NAME}" in proc.stderr, proc.stderr
    assert proxy.requests == []
    assert not (tmp_path / "cache").exists()


def test_committed_pins_cover_every_supported_platform() -> None:
    pins = ENSURE_GO.read_pins(HACK / "go-toolchain.sha256")
    for plat in ("linux-amd64", "linux-arm64", "darwin-amd64", "darwin-arm64"):
        assert f"v0.0.1-go{VERSION}.{plat}.zip" in pins, f"no pin for {plat} at Go {VERSION}"


def test_control_plane_build_runs_with_the_fetched_go(
    tmp_path: Path, proxy: Proxy, tools: Path
) -> None:
    """hack/build-control-plane.sh no longer stops at "go is required": it builds with the
    toolchain ensure-go.sh fetched (here the fake one, which records its invocations)."""
    older = fake_go_on_path(tmp_path, "go1.25.3")  # whatever /usr/bin holds, this one is first
    log = tmp_path / "go.log"
    env = {
        "PATH": os.pathsep.join([str(older), str(tools), "/usr/bin", "/bin"]),
        "HOME": str(tmp_path / "home"),
        "JOBCONTROLLER_CACHE": str(tmp_path / "cache"),
        "JOBCONTROLLER_GO_PINS": str(write_pins(tmp_path / "pins", ZIP_SHA)),
        "GOPROXY": proxy.url,
        "FAKE_GO_LOG": str(log),
    }
    proc = subprocess.run(
        [BASH, str(HACK / "build-control-plane.sh")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    out = Path(proc.stdout.splitlines()[-1])
    assert all(os.access(out / b, os.X_OK) for b in ("kube-apiserver", "etcd", "kwok"))
    go = str(installed(tmp_path) / "bin" / "go")
    # ensure-go.sh's own `go version` check runs from the .partial directory before the rename.
    calls = [c for c in log.read_text().splitlines() if c.split()[1] != "version"]
    assert any(c.startswith(f"{go} build ") for c in calls), calls
    assert all(c.startswith(f"{go} ") for c in calls), calls
