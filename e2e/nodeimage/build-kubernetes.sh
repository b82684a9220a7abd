#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# build-kubernetes.sh MINOR OUT: builds kubeadm, kubelet, kubectl, the
# control-plane binaries and kube-proxy of versions/MINOR.env from the Go
# module proxy into OUT (one go build: shared compilation), with the module
# versions kubernetes/MINOR.mod pins.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
minor="$1" out="$2"
# shellcheck disable=SC1090
source "$here/versions/$minor.env"
mkdir -p "$out"
v="$KUBERNETES_VERSION"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=${minor#1.}"
  ldflags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
  ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
cd "$here/kubernetes"
# No DWARF: the compiler skips writing it (-dwarf=false) and the linker
# keeps none (-w): the cheapest flags that leave the binaries as they run.
CGO_ENABLED=0 GOFLAGS= go build -modfile="$minor.mod" -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
