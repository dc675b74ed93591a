#!/usr/bin/env python3
"""Find or fetch the Go toolchain the builds need; print the directory that holds its `go`.

Run through hack/ensure-go.sh by every script that builds Go code, so that a machine with only
Python and make still runs `make demo` and `make test`:

1. a `go` on PATH that reports at least GO_MIN (hack/control-plane.env) is used as it is: its
   directory is printed and nothing is fetched;
2. else Go GO_VERSION for this platform, unpacked earlier under
   ``$JOBCONTROLLER_CACHE/go/go<GO_VERSION>.<goos>-<goarch>/`` (default cache
   ``~/.cache/jobcontroller``), is reused without any network access;
3. else it is fetched once: the zip the Go module proxy serves as module ``golang.org/toolchain``
   (the same one ``GOTOOLCHAIN=auto`` would fetch), from the first proxy in GOPROXY (default
   https://proxy.golang.org). Its SHA-256 must equal the one pinned for the platform in
   hack/go-toolchain.sha256; a platform without a pin, or a zip with another hash, is refused and
   nothing stays behind. The zip is unpacked into a ``.partial-*`` directory renamed into place
   once complete, so an interrupted run never leaves a half toolchain that a later one would use.

``JOBCONTROLLER_GO_PINS`` names another pin table (same format): for a mirror that serves
toolchain builds of its own, and for the tests, which serve a small fake toolchain.

Standard library only, since it runs with the system's python3 before any venv exists. Messages
go to stderr; stdout carries only the directory.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from pathlib import Path, PurePosixPath

HERE = Path(__file__).resolve().parent
DEFAULT_PROXY = "https://proxy.golang.org"
# The real zips are about 70 MB; this bounds what an unverified download may write to disk.
MAX_ZIP_BYTES = 512 << 20
NET_TIMEOUT_S = 60
_VERSION = re.compile(r"\bgo(\d+)\.(\d+)(?:\.(\d+))?(?:(beta|rc)(\d+))?")
# A pre-release sorts before its release: go1.26rc1 < go1.26.0.
_STAGE = {"beta": 0, "rc": 1, None: 2}


class Refused(Exception):
    """A reason to stop with a message and exit status 1 instead of a traceback."""


def log(msg: str) -> None:
    print(f"[ensure-go {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def read_env(path: Path) -> dict[str, str]:
    """KEY=VALUE lines of a shell env file (comments and blank lines skipped)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip().strip("'\"")
    return out


def parse_version(text: str) -> tuple[int, int, int, int, int] | None:
    """The version in `go version` output (or in "go1.26.0"), as a comparable tuple."""
    m = _VERSION.search(text)
    if m is None:
        return None
    return (int(m[1]), int(m[2]), int(m[3] or 0), _STAGE[m[4]], int(m[5] or 0))


def existing_go(minimum: str) -> Path | None:
    """The directory of the `go` on PATH when it reports at least `minimum`, else None."""
    found = shutil.which("go")
    if found is None:
        return None
    env = dict(os.environ, GOTOOLCHAIN="local")  # report this binary, never a switched-to one
    try:
        proc = subprocess.run(
            [found, "version"], env=env, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        log(f"{found} does not run ({e}); not using it")
        return None
    have = parse_version(proc.stdout) if proc.returncode == 0 else None
    need = parse_version(f"go{minimum}")
    assert need is not None, f"GO_MIN={minimum!r} in control-plane.env is not a Go version"
    if have is None:
        log(f"cannot tell the version of {found} ({proc.stdout.strip() or proc.stderr.strip()})")
        return None
    if have < need:
        log(f"{found} is {proc.stdout.strip()}: older than the go{minimum} the builds need")
        return None
    # The real directory (Homebrew, Debian's alternatives link go from a shared bin/): putting
    # it first on PATH then shadows nothing else the user has.
    return Path(found).resolve().parent


def host_platform(minimum: str) -> str:
    system, machine = platform.system(), platform.machine()
    goos = {"Linux": "linux", "Darwin": "darwin"}.get(system)
    goarch = {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        machine.lower()
    )
    if goos is None or goarch is None:
        raise Refused(
            f"no Go toolchain is pinned for {system}/{machine}: install Go {minimum} or newer "
            "and put it on PATH"
        )
    return f"{goos}-{goarch}"


def read_pins(path: Path) -> dict[str, str]:
    """File name -> SHA-256 (hex) from a table in sha256sum's format."""
    pins: dict[str, str] = {}
    try:
        text = path.read_text()
    except OSError as e:
        raise Refused(f"cannot read the pinned checksums {path}: {e}") from e
    for n, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        fields = line.split()
        if len(fields) != 2 or not re.fullmatch(r"[0-9a-fA-F]{64}", fields[0]):
            raise Refused(f"{path}:{n}: expected '<sha256>  <file name>', got {line!r}")
        pins[fields[1].lstrip("*")] = fields[0].lower()
    return pins


def proxy_base(minimum: str) -> str:
    """The first proxy of GOPROXY's list, as the go command would try it."""
    raw = os.environ.get("GOPROXY") or DEFAULT_PROXY
    for entry in re.split(r"[,|]", raw):
        entry = entry.strip()
        if entry == "off":
            break
        if entry and entry != "direct":
            return entry.rstrip("/")
    raise Refused(
        f"GOPROXY={raw} names no proxy to fetch the Go toolchain from: install Go {minimum} or "
        "newer and put it on PATH, or set GOPROXY to a proxy"
    )


def redact(url: str) -> str:
    """The URL without credentials, for messages."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None and parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def download(url: str, dest: Path) -> str:
    """Stream `url` into `dest`; return the SHA-256 of what was written."""
    req = urllib.request.Request(url, headers={"User-Agent": "jobcontroller-ensure-go"})
    digest = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(req, timeout=NET_TIMEOUT_S) as resp, dest.open("wb") as out:
            expected = resp.headers.get("Content-Length")
            while chunk := resp.read(1 << 20):
                size += len(chunk)
                if size > MAX_ZIP_BYTES:
                    raise Refused(f"{redact(url)} is larger than {MAX_ZIP_BYTES >> 20} MiB")
                digest.update(chunk)
                out.write(chunk)
    except urllib.error.HTTPError as e:
        raise Refused(f"cannot fetch {redact(url)}: HTTP {e.code} {e.reason}") from e
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise Refused(f"cannot fetch {redact(url)}: {reason}") from e
    if expected is not None and expected.isdigit() and int(expected) != size:
        raise Refused(f"{redact(url)}: the download stopped at {size} of {expected} bytes")
    return digest.hexdigest()


def unpack(archive: Path, dest: Path, prefix: str) -> None:
    """Extract the module zip's files below `prefix` into `dest`.

    The proxy's zips may not carry file modes; the go command restores the executable bits of
    bin/* and pkg/tool/*/* itself when it unpacks a toolchain, and so does this.
    """
    with zipfile.ZipFile(archive) as zf:
        for info in zf.infolist():
            if not info.filename.startswith(prefix):
                raise Refused(f"unexpected entry {info.filename!r} in {archive.name}")
            rel = PurePosixPath(info.filename[len(prefix) :])
            if info.is_dir() or not rel.parts:
                continue
            if rel.is_absolute() or ".." in rel.parts:
                raise Refused(f"unsafe entry {info.filename!r} in {archive.name}")
            target = dest.joinpath(*rel.parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            with zf.open(info) as src, target.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
            tool = (len(rel.parts) == 2 and rel.parts[0] == "bin") or (
                len(rel.parts) == 4 and rel.parts[:2] == ("pkg", "tool")
            )
            executable = tool or (info.external_attr >> 16) & 0o111
            target.chmod(0o755 if executable else 0o644)


def _runs(go: Path) -> str:
    env = dict(os.environ, GOTOOLCHAIN="local")
    try:
        proc = subprocess.run(
            [str(go), "version"], env=env, capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Refused(f"the fetched {go} does not run on this machine: {e}") from e
    if proc.returncode != 0:
        raise Refused(f"the fetched {go} does not run on this machine: {proc.stderr.strip()}")
    return proc.stdout.strip()


def _mkdirs(path: Path) -> list[Path]:
    """mkdir -p; returns the directories it created, outermost first."""
    missing: list[Path] = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    path.mkdir(parents=True, exist_ok=True)
    return missing[::-1]


def install(*, version: str, minimum: str, plat: str, cache: Path, pins_file: Path) -> Path:
    """The bin/ directory of Go `version` for `plat` under `cache`, fetched when not there yet."""
    root = cache / "go"
    final = root / f"go{version}.{plat}"
    if os.access(final / "bin" / "go", os.X_OK):
        return final / "bin"
    module_version = f"v0.0.1-go{version}.{plat}"
    name = f"{module_version}.zip"
    pin = read_pins(pins_file).get(name)
    if pin is None:
        raise Refused(
            f"no pinned SHA-256 for {name} in {pins_file}, so Go {version} for {plat} cannot be "
            f"verified: install Go {minimum} or newer and put it on PATH"
        )
    url = f"{proxy_base(minimum)}/golang.org/toolchain/@v/{name}"
    created = _mkdirs(root)
    tmp: Path | None = None
    partial: Path | None = None
    try:
        fd, tmp_name = tempfile.mkstemp(dir=root, prefix=".download-", suffix=".zip")
        os.close(fd)
        tmp = Path(tmp_name)
        log(f"fetching Go {version} for {plat} (about 70 MB) from {redact(url)}")
        start = time.monotonic()
        got = download(url, tmp)
        if got != pin:
            raise Refused(
                f"checksum mismatch for {redact(url)}: got sha256 {got}, pinned {pin} "
                f"({pins_file}); refusing to install it"
            )
        partial = Path(tempfile.mkdtemp(dir=root, prefix=f"{final.name}.partial-"))
        partial.chmod(0o755)  # mkdtemp's 0700 would hide the toolchain from other users
        unpack(tmp, partial, f"golang.org/toolchain@{module_version}/")
        reported = _runs(partial / "bin" / "go")
        try:
            partial.rename(final)
            partial = None
        except OSError:
            if not os.access(final / "bin" / "go", os.X_OK):
                raise
            log(f"another run installed {final} meanwhile; using it")  # keep theirs
        log(f"{reported}: verified and unpacked in {final} ({time.monotonic() - start:.0f}s)")
    except BaseException:
        _discard(tmp, partial)
        for d in reversed(created):  # leave no trace of a refused install, not even its dirs
            try:
                d.rmdir()
            except OSError:
                break
        raise
    _discard(tmp, partial)  # the zip is not kept: the unpacked tree is what is reused
    return final / "bin"


def _discard(tmp: Path | None, partial: Path | None) -> None:
    if partial is not None:
        shutil.rmtree(partial, ignore_errors=True)
    if tmp is not None:
        tmp.unlink(missing_ok=True)


def main() -> int:
    env = read_env(HERE / "control-plane.env")
    minimum, version = env["GO_MIN"], env["GO_VERSION"]
    try:
        found = existing_go(minimum)
        if found is None:
            cache = Path(
                os.environ.get("JOBCONTROLLER_CACHE") or Path.home() / ".cache" / "jobcontroller"
            ).expanduser()
            pins = Path(os.environ.get("JOBCONTROLLER_GO_PINS") or HERE / "go-toolchain.sha256")
            plat = host_platform(minimum)
            found = install(
                version=version, minimum=minimum, plat=plat, cache=cache, pins_file=pins
            )
    except Refused as e:
        print(f"ensure-go: {e}", file=sys.stderr)
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main())
