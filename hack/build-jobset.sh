#!/usr/bin/env bash
# Builds JobSet's controller (the root package of module sigs.k8s.io/jobset) from the Go module
# proxy, as hack/build-kueue.sh builds Kueue: `go install` at the exact version with the
# installed toolchain (GOTOOLCHAIN=local; hack/ensure-go.sh fetches one when it is missing or
# older), niced, into $JOBCONTROLLER_CACHE/bin/jobset-<version>/ (default
# ~/.cache/jobcontroller), built once and reused. Next to the binary it copies the module's
# CRD (crd/) and webhook manifests (webhook.yaml), which the test kit installs
# (jobcontroller.testing.jobset), and the module's config/ (config/), which manifests/jobset/
# was generated from. Set JOBCONTROLLER_JOBSET_BIN to a directory that already holds them to skip
# building. Prints the directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# The one place that pins JobSet's version (Kubeflow Trainer v2.3.0 depends on this one);
# manifests/jobset/ names the same version in its image tag (tests/unit/test_jobset_manifest.py).
JOBSET_VERSION=${JOBSET_VERSION:-0.12.0}

have_all() { [ -x "$1/jobset" ] && [ -d "$1/crd" ] && [ -f "$1/webhook.yaml" ]; }

if [ -n "${JOBCONTROLLER_JOBSET_BIN:-}" ]; then
  have_all "$JOBCONTROLLER_JOBSET_BIN" || { echo "JOBCONTROLLER_JOBSET_BIN=$JOBCONTROLLER_JOBSET_BIN lacks jobset, crd/ or webhook.yaml" >&2; exit 1; }
  echo "$JOBCONTROLLER_JOBSET_BIN"; exit 0
fi

cache=${JOBCONTROLLER_CACHE:-$HOME/.cache/jobcontroller}
out="$cache/bin/jobset-$JOBSET_VERSION"
if have_all "$out"; then echo "$out"; exit 0; fi
# One build at a time: a second caller (the test kit waiting for a build started in the
# background) blocks here, then finds the finished build.
mkdir -p "$cache/bin"
if command -v flock >/dev/null; then
  exec 9>"$cache/bin/.jobset.lock"; flock 9
  if have_all "$out"; then echo "$out"; exit 0; fi
fi

export GOTOOLCHAIN=local CGO_ENABLED=0
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
case "$GOPROXY" in *direct*) GOPROXY=${GOPROXY%%,direct*} ;; esac  # no git offline
log() { printf '[build-jobset %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# The go on PATH when new enough, else the pinned toolchain (fetched once; hack/ensure-go.sh).
gobin=$(bash "$here/ensure-go.sh" | tail -n1); export PATH="$gobin:$PATH"
mkdir -p "$out.partial"
start=$(date +%s)

mod=sigs.k8s.io/jobset
# `go install sigs.k8s.io/jobset@v...` would first ask the proxy for the module's version list
# (its deprecation check), which the proxy does not serve for this module; downloading the exact
# version and building its root package inside it needs only that version, and builds with the
# module's own go.mod and go.sum, as upstream's `make build` does.
src=$(cd "${TMPDIR:-/tmp}" && go mod download -json "$mod@v$JOBSET_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -f "$src/main.go" ] || { echo "no $mod@v$JOBSET_VERSION source (go mod download failed?)" >&2; exit 1; }
if [ ! -x "$out.partial/jobset" ]; then
  log "building $mod v$JOBSET_VERSION (cold: about 4 min on 2 cores)"
  v=$mod/pkg/version
  (cd "$src" && GOFLAGS=-mod=readonly nice go build -trimpath -o "$out.partial/jobset" \
    -ldflags "-s -w -X $v.GitVersion=v$JOBSET_VERSION -X $v.GitCommit=0000000000000000000000000000000000000000" .)
  log "built jobset ($(( $(date +%s) - start ))s so far)"
fi

# The manifests the test kit installs, from the same module version.
[ -d "$src/config/components/crd/bases" ] || { echo "no CRDs in $src" >&2; exit 1; }
rm -rf "$out.partial/crd" "$out.partial/config"; mkdir -p "$out.partial/crd"
cp "$src"/config/components/crd/bases/*.yaml "$out.partial/crd/"
cp "$src/config/components/webhook/manifests.yaml" "$out.partial/webhook.yaml"
cp -r "$src/config" "$out.partial/config"
chmod -R u+w "$out.partial"

rm -rf "$out"; mv "$out.partial" "$out"
log "jobset ready in $out ($(( $(date +%s) - start ))s)"
echo "$out"
