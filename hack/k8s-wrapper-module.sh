#!/usr/bin/env bash
# Writes the wrapper module through which k8s.io/kubernetes' commands are built (its staging
# modules pinned to the release), into $1 unless a go.mod is there already. Used by
# hack/build-control-plane.sh and hack/build-node.sh; needs `go` on PATH and K8S_VERSION.
set -euo pipefail
src=$1
[ -f "$src/go.mod" ] && exit 0
mkdir -p "$src"
minor=${K8S_VERSION#1.}; minor=${minor%%.*}
staging=(api apiextensions-apiserver apimachinery apiserver cli-runtime client-go cloud-provider
  cluster-bootstrap code-generator component-base component-helpers controller-manager cri-api
  cri-client csi-translation-lib dynamic-resource-allocation endpointslice externaljwt kms
  kube-aggregator kube-controller-manager kube-proxy kube-scheduler kubectl kubelet metrics
  mount-utils pod-security-admission sample-apiserver sample-cli-plugin sample-controller)
[ "$minor" -ge 36 ] && staging+=(cri-streaming streaming)
gover=$(go env GOVERSION); gover=${gover#go}; gomin=${gover#1.}; gomin=${gomin%%.*}
{
  printf 'module local/k8sbin\n\ngo 1.%s.0\n\ngodebug default=go1.%s\n\nrequire k8s.io/kubernetes v%s\n\nreplace (\n' \
    "$gomin" "$([ "$minor" -ge 36 ] && echo 26 || echo 25)" "$K8S_VERSION"
  for m in "${staging[@]}"; do printf '\tk8s.io/%s => k8s.io/%s v0.%s\n' "$m" "$m" "${K8S_VERSION#1.}"; done
  echo ')'
} > "$src/go.mod.partial"
mv "$src/go.mod.partial" "$src/go.mod"
