#!/usr/bin/env bash
# Prints, on its last line, a directory holding a `go` new enough for the builds, to put first on
# PATH: the go on PATH when it reports GO_MIN (hack/control-plane.env) or newer, else Go
# GO_VERSION fetched once from the Go module proxy (module golang.org/toolchain), checked against
# the SHA-256 pinned in hack/go-toolchain.sha256 and unpacked under
# ${JOBCONTROLLER_CACHE:-~/.cache/jobcontroller}/go/. Details: hack/ensure_go.py.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null \
  || { echo "ensure-go: python3 is required (it fetches and verifies Go when go is missing or older)" >&2; exit 1; }
exec python3 "$here/ensure_go.py" "$@"
