#!/usr/bin/env bash
# The parts of a real worker node for the local cluster (REAL_NODE=1, make conformance):
#   - Debian packages, installed when missing: containerd, runc, containernetworking-plugins
#     (the bridge, host-local and loopback CNI plugins), iptables and conntrack (kube-proxy),
#     mmdebstrap (the images), gcc (the pause binary);
#   - from the Go module proxy: kubelet and kube-proxy of K8S_VERSION (the same wrapper module
#     as the control plane's) and CoreDNS, cached per version like the control plane;
#   - the pod sandbox's pause binary, built static from hack/images/pause.c.
# Needs root (a kubelet and containerd run as root). Prints the binary directory last.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=control-plane.env
. "$here/control-plane.env"
log() { printf '[build-node %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

[ "$(id -u)" = 0 ] || { echo "a real node needs root (kubelet, containerd, network namespaces)" >&2; exit 1; }

pkgs=(containerd runc containernetworking-plugins iptables conntrack mmdebstrap gcc libc6-dev iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing Debian packages: ${missing[*]}"
  # The package's own service must not start: the node starts its containerd itself.
  printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null \
    || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null; }
  rm -f /usr/sbin/policy-rc.d
fi

cache=${JOBCONTROLLER_CACHE:-$HOME/.cache/jobcontroller}
out="$cache/bin/node-k8s-$K8S_VERSION-coredns-$COREDNS_VERSION"
have() { [ -x "$out/kubelet" ] && [ -x "$out/kube-proxy" ] && [ -x "$out/coredns" ] && [ -x "$out/pause" ]; }
if have; then echo "$out"; exit 0; fi
# One build at a time: a second caller (the test kit waiting for a build started in the
# background) blocks here, then finds the finished build.
mkdir -p "$cache/bin"
if command -v flock >/dev/null; then
  exec 9>"$cache/bin/.node.lock"; flock 9
  if have; then echo "$out"; exit 0; fi
fi

export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod
export GOPROXY=${GOPROXY:-https://proxy.golang.org}
case "$GOPROXY" in *direct*) GOPROXY=${GOPROXY%%,direct*} ;; esac
# The go on PATH when new enough, else the pinned toolchain (fetched once; hack/ensure-go.sh).
gobin=$(bash "$here/ensure-go.sh" | tail -n1); export PATH="$gobin:$PATH"
mkdir -p "$out.partial"
start=$(date +%s)

minor=${K8S_VERSION#1.}; minor=${minor%%.*}
for b in kubelet kube-proxy; do
  [ -x "$out.partial/$b" ] && continue
  # The control plane's wrapper module (also there when the control plane was built; written
  # here when its binaries came from elsewhere, JOBCONTROLLER_K8S_BIN).
  src="$cache/src/k8s-$K8S_VERSION"
  K8S_VERSION=$K8S_VERSION bash "$here/k8s-wrapper-module.sh" "$src"; cd "$src"
  P=k8s.io/kubernetes/cmd
  go get "$P/$b@v$K8S_VERSION"
  ldf="-s -w"
  bd=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for p in k8s.io/client-go/pkg/version k8s.io/component-base/version; do
    ldf+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean -X $p.gitCommit=0000000000000000000000000000000000000000 -X $p.buildDate=$bd"
  done
  log "building $b v$K8S_VERSION (cold: 1 to 2 min on 2 cores)"
  go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "$ldf" -o "$out.partial/$b" "$P/$b"
  log "built $b ($(( $(date +%s) - start ))s so far)"
done

if [ ! -x "$out.partial/coredns" ]; then
  log "building CoreDNS v$COREDNS_VERSION (cold: about 2 min)"
  GOBIN="$out.partial" go install -trimpath -ldflags "-s -w" "github.com/coredns/coredns@v$COREDNS_VERSION"
  log "built coredns ($(( $(date +%s) - start ))s so far)"
fi

if [ ! -x "$out.partial/pause" ]; then
  gcc -static -O2 -Wall -o "$out.partial/pause" "$here/images/pause.c"
  strip "$out.partial/pause"
fi

rm -rf "$out"; mv "$out.partial" "$out"
log "node binaries ready in $out ($(( $(date +%s) - start ))s)"
echo "$out"
