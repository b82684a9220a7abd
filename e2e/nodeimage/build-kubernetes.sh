#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# Builds kubeadm, kubelet, kubectl, the control-plane binaries and kube-proxy
# from the Go module proxy into $1 (one go build: shared compilation).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
out="$1"
mkdir -p "$out"
v="$KUBERNETES_VERSION"
minor="${v#v*.}"; minor="${minor%%.*}"
ldflags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ldflags+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitCommit=0000000000000000000000000000000000000000 -X $pkg.gitTreeState=clean"
  ldflags+=" -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
cd "$here/kubernetes"
CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$out/" \
  k8s.io/kubernetes/cmd/kubeadm k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kubectl \
  k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager \
  k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy
