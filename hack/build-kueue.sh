#!/usr/bin/env bash
# Builds Kueue's manager (sigs.k8s.io/kueue/cmd/kueue) from the Go module proxy, the same way
# as hack/build-control-plane.sh builds the control plane: `go install` with the installed
# toolchain (GOTOOLCHAIN=local; hack/ensure-go.sh fetches one when it is missing or older),
# niced, into $JOBCONTROLLER_CACHE/bin/kueue-<version>/ (default ~/.cache/jobcontroller),
# built once and reused. Next to the binary it copies the module's
# CRDs (config/components/crd/bases) and webhook manifests, which the test kit installs
# (jobcontroller.testing.kueue). Set JOBCONTROLLER_KUEUE_BIN to a directory that already holds
# them to skip building. Prints the directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KUEUE_VERSION=${KUEUE_VERSION:-0.17.0}

have_all() { [ -x "$1/kueue" ] && [ -d "$1/crd" ] && [ -f "$1/webhook.yaml" ]; }

if [ -n "${JOBCONTROLLER_KUEUE_BIN:-}" ]; then
  have_all "$JOBCONTROLLER_KUEUE_BIN" || { echo "JOBCONTROLLER_KUEUE_BIN=$JOBCONTROLLER_KUEUE_BIN lacks kueue, crd/ or webhook.yaml" >&2; exit 1; }
  echo "$JOBCONTROLLER_KUEUE_BIN"; exit 0
fi

cache=${JOBCONTROLLER_CACHE:-$HOME/.cache/jobcontroller}
out="$cache/bin/kueue-$KUEUE_VERSION"
if have_all "$out"; then echo "$out"; exit 0; fi
# One build at a time: a second caller (the test kit waiting for a build started in the
# background) blocks here, then finds the finished build.
mkdir -p "$cache/bin"
if command -v flock >/dev/null; then
  exec 9>"$cache/bin/.kueue.lock"; flock 9
  if have_all "$out"; then echo "$out"; exit 0; fi
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
case "$GOPROXY" in *direct*) GOPROXY=${GOPROXY%%,direct*} ;; esac  # no git offline
log() { printf '[build-kueue %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# The go on PATH when new enough, else the pinned toolchain (fetched once; hack/ensure-go.sh).
gobin=$(bash "$here/ensure-go.sh" | tail -n1); export PATH="$gobin:$PATH"
mkdir -p "$out.partial"
start=$(date +%s)

mod=sigs.k8s.io/kueue
if [ ! -x "$out.partial/kueue" ]; then
  log "building $mod/cmd/kueue v$KUEUE_VERSION (cold: about 6 min on 2 cores)"
  v=$mod/pkg/version
  GOBIN="$out.partial" nice go install -trimpath \
    -ldflags "-s -w -X $v.GitVersion=v$KUEUE_VERSION -X $v.GitCommit=0000000000000000000000000000000000000000 -X $v.BuildDate=$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    "$mod/cmd/kueue@v$KUEUE_VERSION"
  log "built kueue ($(( $(date +%s) - start ))s so far)"
fi

# The manifests the test kit installs, from the same module version.
src=$(cd "${TMPDIR:-/tmp}" && go mod download -json "$mod@v$KUEUE_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -d "$src/config/components/crd/bases" ] || { echo "no CRDs in $src" >&2; exit 1; }
rm -rf "$out.partial/crd"; mkdir -p "$out.partial/crd"
cp "$src"/config/components/crd/bases/*.yaml "$out.partial/crd/"
cp "$src/config/components/webhook/manifests.yaml" "$out.partial/webhook.yaml"
chmod -R u+w "$out.partial"

rm -rf "$out"; mv "$out.partial" "$out"
log "kueue ready in $out ($(( $(date +%s) - start ))s)"
echo "$out"
