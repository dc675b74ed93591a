#!/usr/bin/env bash
# Builds the local Kubernetes control plane from the Go module proxy (no release binaries
# can be downloaded here): kube-apiserver, kube-controller-manager, kube-scheduler and
# kubectl from k8s.io/kubernetes through a wrapper module, etcd from its server module, and
# kwok, with the installed Go or, when it is missing or older, the one hack/ensure-go.sh fetches.
# Idempotent: binaries are cached per version under $JOBCONTROLLER_CACHE (default
# ~/.cache/jobcontroller) and skipped when present. Set JOBCONTROLLER_K8S_BIN to a directory
# that already holds these binaries to skip building altogether.
# Prints the binary directory on its last line.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=control-plane.env
. "$here/control-plane.env"

bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)
have_all() { local d=$1 b; for b in "${bins[@]}"; do [ -x "$d/$b" ] || return 1; done; }

if [ -n "${JOBCONTROLLER_K8S_BIN:-}" ]; then
  have_all "$JOBCONTROLLER_K8S_BIN" || { echo "JOBCONTROLLER_K8S_BIN=$JOBCONTROLLER_K8S_BIN lacks one of: ${bins[*]}" >&2; exit 1; }
  echo "$JOBCONTROLLER_K8S_BIN"; exit 0
fi

cache=${JOBCONTROLLER_CACHE:-$HOME/.cache/jobcontroller}
out="$cache/bin/k8s-$K8S_VERSION-etcd-$ETCD_VERSION-kwok-$KWOK_VERSION"
if have_all "$out"; then echo "$out"; exit 0; fi
# One build at a time: a second caller (the test kit waiting for a build started in the
# background) blocks here, then finds the finished build.
mkdir -p "$cache/bin"
if command -v flock >/dev/null; then
  exec 9>"$cache/bin/.control-plane.lock"; flock 9
  if have_all "$out"; then echo "$out"; exit 0; fi
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
case "$GOPROXY" in *direct*) GOPROXY=${GOPROXY%%,direct*} ;; esac  # no git offline
log() { printf '[build-control-plane %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
# The go on PATH when new enough, else the pinned toolchain (fetched once; hack/ensure-go.sh).
gobin=$(bash "$here/ensure-go.sh" | tail -n1); export PATH="$gobin:$PATH"
mkdir -p "$out.partial"
start=$(date +%s)

minor=${K8S_VERSION#1.}; minor=${minor%%.*}
k8s_bins=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
need_k8s=0; for b in "${k8s_bins[@]}"; do [ -x "$out.partial/$b" ] || need_k8s=1; done
if [ $need_k8s = 1 ]; then
  src="$cache/src/k8s-$K8S_VERSION"
  rm -f "$src/go.mod"  # written afresh: a module left by an older build may pin other versions
  K8S_VERSION=$K8S_VERSION bash "$here/k8s-wrapper-module.sh" "$src"; cd "$src"
  P=k8s.io/kubernetes/cmd
  log "fetching k8s.io/kubernetes v$K8S_VERSION and its modules (first time: a few minutes)"
  go get "$P/kube-apiserver@v$K8S_VERSION" "$P/kube-controller-manager@v$K8S_VERSION" \
    "$P/kube-scheduler@v$K8S_VERSION" "$P/kubectl@v$K8S_VERSION"
  ldf="-s -w"
  bd=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=$bd"
  done
  for b in "${k8s_bins[@]}"; do
    [ -x "$out.partial/$b" ] && continue
    log "building $b v$K8S_VERSION (cold: about 4 min for kube-apiserver on 2 cores, under 1 min for each one after it)"
    go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldf" -o "$out.partial/$b" "$P/$b"
    log "built $b ($(( $(date +%s) - start ))s so far)"
  done
fi

if [ ! -x "$out.partial/etcd" ]; then
  src="$cache/src/etcd-$ETCD_VERSION"; mkdir -p "$src"; cd "$src"
  [ -f go.mod ] || go mod init local/etcdbin >/dev/null 2>&1
  log "fetching and building etcd v$ETCD_VERSION"
  go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$out.partial/etcd" go.etcd.io/etcd/server/v3
  log "built etcd ($(( $(date +%s) - start ))s so far)"
fi

if [ ! -x "$out.partial/kwok" ]; then
  log "building kwok v$KWOK_VERSION"
  GOBIN="$out.partial" go install -trimpath -ldflags "-s -w -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=v$K8S_VERSION" \
    "sigs.k8s.io/kwok/cmd/kwok@v$KWOK_VERSION"
  log "built kwok ($(( $(date +%s) - start ))s so far)"
fi

"$out.partial/kube-apiserver" --version >&2
# Not `| head -1`: head exits after one line, etcd dies of SIGPIPE and pipefail fails the build.
etcd_version=$("$out.partial/etcd" --version); echo "${etcd_version%%$'\n'*}" >&2
rm -rf "$out"; mv "$out.partial" "$out"
log "control plane ready in $out ($(( $(date +%s) - start ))s)"
echo "$out"
