#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# make node-image [K8S=1.3x]: builds a kind node image with no container
# registry, for the Kubernetes minor K8S (default: versions/default).
#
#   Kubernetes, etcd, CoreDNS, CNI plugins, crictl,
#   containerd 2, runc                               from the Go module proxy
#   pause, per-node-cni, per-node-runc, and CoreDNS's
#   main with only the plugins kubeadm's Corefile uses  from this repository
#   systemd, iptables, libseccomp                    from Debian (debootstrap)
#   kind's node contract (entrypoint, units)         from the sigs.k8s.io/kind module
#
# Versions: versions/MINOR.env (one file per supported minor) and
# versions/debian.env; the Go modules Kubernetes and etcd build with are
# pinned in kubernetes/MINOR.mod, etcd/MINOR.mod and coredns/MINOR.mod (pin.sh
# writes them).
#
# Control-plane images are tagged with the names kubeadm expects and preloaded
# into the node's containerd. Every step is cached by a hash of its inputs, so
# a second run with the same inputs takes seconds. Prints the image name last.
#
# Also builds per-node.liken.sh/debian:<suite>, the node's base system (and
# kube-proxy's and the CNI daemon's). The project's own images hold binaries
# compiled on the host and need no base.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
minor="${K8S:-$(cat "$here/versions/default")}"
if [[ ! -f "$here/versions/$minor.env" ]]; then
  echo "build.sh: no versions/$minor.env; the supported minors are: $(cd "$here/versions" && ls 1.*.env | sed 's|\.env$||' | tr '\n' ' ')" >&2
  exit 2
fi
# shellcheck source=versions/debian.env
source "$here/versions/debian.env"
# shellcheck disable=SC1090
source "$here/versions/$minor.env"
out="${NODEIMAGE_OUT:-$repo/_out/nodeimage}"
vout="$out/$minor"   # what is built for this minor: binaries, stamps, images.env
bin="$vout/bin"
mkdir -p "$bin"

log() { printf '[node-image %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
# quiet CMD...: runs CMD, printing its output only if it fails.
quiet() {
  local f
  f="$(mktemp)"
  if ! "$@" >"$f" 2>&1; then cat "$f" >&2; rm -f "$f"; return 1; fi
  rm -f "$f"
}
# hash_of FILE...: a key of the files' contents and names relative to the
# repository, so that another clone of it finds the same keys.
hash_of() { (cd "$repo" && sha256sum "${@#"$repo/"}") | sha256sum | cut -c1-12; }
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
# cached NAME KEY "BINARIES" CMD...: runs CMD unless the stamp for NAME
# records KEY and every one of BINARIES (in $bin) is there: a stamp alone
# never stands for a file.
cached() {
  local name="$1" key="$2" outputs="$3"; shift 3
  local stamp="$vout/.stamp-$name" b all=1
  for b in $outputs; do [[ -x "$bin/$b" ]] || all=0; done
  if (( all )) && [[ -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then step "$name" cached 0; return; fi
  rm -f "$stamp"
  local start=$SECONDS
  "$@"
  echo "$key" > "$stamp"
  step "$name" built "$((SECONDS - start))"
}
# step NAME HOW SECONDS: logs a step and adds it to the table printed at the
# end (steps in lanes that run at once share the cores: each time is the
# step's own wall time).
steps="$out/steps.tsv"
step() {
  if [[ "$2" == cached ]]; then log "$1: cached"; else log "$1: built in $3 s"; fi
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$(date -u +%H:%M:%S)" >> "$steps"
}
: > "$steps"
build_start=$SECONDS

# (go list -m names the module's folder only once it is downloaded)
kind_dir="$(cd "$repo" && go mod download sigs.k8s.io/kind && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)"
kind_version="$(cd "$repo" && go list -m -f '{{.Version}}' sigs.k8s.io/kind)"
versions_key="$(hash_of "$here/versions/$minor.env")"

# --- binaries ---------------------------------------------------------------
build_kubernetes() { "$here/build-kubernetes.sh" "$minor" "$bin"; }
build_etcd() {
  (cd "$here/etcd" && CGO_ENABLED=0 GOFLAGS= go build -modfile="$minor.mod" -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$bin/etcd" go.etcd.io/etcd/server/v3)
}
# containerd 2 and runc: runc needs cgo and libseccomp's headers (the node
# has Debian's libseccomp2, the same release as this host's).
build_runtime() {
  local c=github.com/containerd/containerd/v2
  (cd /tmp && CGO_ENABLED=0 GOBIN="$bin" GOFLAGS= go install -trimpath -gcflags=all=-dwarf=false \
    -ldflags "-s -w -X $c/version.Version=$CONTAINERD_VERSION -X $c/version.Revision=module-proxy" \
    "$c/cmd/containerd@$CONTAINERD_VERSION" "$c/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$c/cmd/ctr@$CONTAINERD_VERSION")
  (cd /tmp && CGO_ENABLED=1 GOBIN="$bin" GOFLAGS= go install -trimpath -gcflags=all=-dwarf=false -tags "seccomp urfave_cli_no_docs" \
    -ldflags "-s -w" "github.com/opencontainers/runc@$RUNC_VERSION")
}
# CoreDNS: coredns/main.go links only the plugins of kubeadm's Corefile (CoreDNS's
# own command links every plugin it ships: ~1,360 packages against ~800).
build_coredns() {
  (cd "$here/coredns" && CGO_ENABLED=0 GOFLAGS= go build -modfile="$minor.mod" -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$bin/coredns" .)
}
build_extras() {
  local p=github.com/containernetworking/plugins/plugins
  (cd /tmp && CGO_ENABLED=0 GOBIN="$bin" GOFLAGS= go install -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" \
    "$p/main/ptp@$CNI_PLUGINS_VERSION" "$p/main/loopback@$CNI_PLUGINS_VERSION" \
    "$p/ipam/host-local@$CNI_PLUGINS_VERSION" "$p/meta/portmap@$CNI_PLUGINS_VERSION")
  (cd /tmp && CGO_ENABLED=0 GOBIN="$bin" GOFLAGS= go install -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" "sigs.k8s.io/cri-tools/cmd/crictl@$CRI_TOOLS_VERSION")
}
build_own() {
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w" -o "$bin/" ./e2e/cmd/pause ./e2e/cmd/per-node-cni ./e2e/cmd/per-node-runc)
}
# kubernetes, binaries: every binary the node image holds, each step cached.
kubernetes() {
  cached kubernetes "$(hash_of "$here/versions/$minor.env" "$here/build-kubernetes.sh" "$here/kubernetes/$minor.mod")" \
    "kubeadm kubelet kubectl kube-apiserver kube-controller-manager kube-scheduler kube-proxy" build_kubernetes
}
# binaries: the node's other binaries.
binaries() {
  cached etcd "$(hash_of "$here/versions/$minor.env" "$here/etcd/$minor.mod")" etcd build_etcd
  cached coredns "$coredns_key" coredns build_coredns
  cached extras "$versions_key" "ptp loopback host-local portmap crictl" build_extras
  cached runtime "$versions_key" "containerd containerd-shim-runc-v2 ctr runc" build_runtime
  cached own "$own_key" "pause per-node-cni per-node-runc" build_own
}
coredns_key="$(hash_of "$here/versions/$minor.env" "$here/coredns/$minor.mod" "$here/coredns/main.go")"
own_pkgs=(e2e/cmd/pause e2e/cmd/per-node-cni e2e/cmd/per-node-runc e2e/internal/ocishim e2e/internal/podnet)
own_key="$(cd "$repo" && cat go.sum $(find "${own_pkgs[@]}" -name '*.go' ! -name '*_test.go' | sort) | sha256sum | cut -c1-12)"

# --- Debian base ------------------------------------------------------------
packages=systemd,systemd-sysv,dbus,conntrack,iptables,nftables,iproute2,ethtool,util-linux,mount,kmod,libseccomp2,pigz,e2fsprogs,bash,ca-certificates,curl,jq,procps,socat
base_key="$(echo "$DEBIAN_SUITE $DEBIAN_MIRROR $packages" | sha256sum | cut -c1-12)"
BASE_IMAGE="per-node.liken.sh/debian:$DEBIAN_SUITE-$base_key"
build_base() {
  local root="$out/rootfs"
  rm -rf "$root"
  debootstrap --variant=minbase --include="$packages" "$DEBIAN_SUITE" "$root" "$DEBIAN_MIRROR" >"$out/debootstrap.log" 2>&1 \
    || { tail -20 "$out/debootstrap.log" >&2; return 1; }
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
  tar -C "$root" -c . | docker import --change 'CMD ["/bin/bash"]' - "$BASE_IMAGE" >/dev/null
  rm -rf "$root"
}
# built: runs a build whose product is an image; the image is the cache.
built() {
  local image="$1" name="$2" start=$SECONDS
  shift 2
  if image_exists "$image"; then step "$name" cached 0; return; fi
  "$@"
  step "$name" built "$((SECONDS - start))"
}
bases() { built "$BASE_IMAGE" "debian base" build_base; }

# --- the node image's key: every input, by content ---------------------------
# An image of that name in Docker is the node image these inputs make: then
# nothing is built, in this clone or any other.
node_key="$(echo "$kind_version $base_key $own_key $(hash_of "$here/versions/$minor.env" "$here/versions/debian.env" \
  "$here/kubernetes/$minor.mod" "$here/etcd/$minor.mod" "$here/coredns/$minor.mod" "$here/coredns/main.go" \
  "$here/build-kubernetes.sh" "$here/build.sh" \
  "$here/Dockerfile.node" "$here"/files/*)" | sha256sum | cut -c1-12)"
NODE_IMAGE="per-node.liken.sh/kind-node:$KUBERNETES_VERSION-$node_key"
if image_exists "$NODE_IMAGE"; then
  log "node image $NODE_IMAGE: cached"
  printf 'NODE_IMAGE=%s\n' "$NODE_IMAGE" > "$vout/images.env"
  echo "$NODE_IMAGE"
  exit 0
fi

# --- what runs, and what runs at the same time ------------------------------
# Debian's packages the steps need are installed first, in one apt-get: two
# steps running it at once would fight over dpkg's lock.
apt_packages=()
command -v debootstrap >/dev/null || apt_packages+=(debootstrap)
if ! dpkg -s libseccomp-dev gcc libc6-dev pkg-config >/dev/null 2>&1; then
  apt_packages+=(libseccomp-dev gcc libc6-dev pkg-config)
fi
if (( ${#apt_packages[@]} )); then
  log "installing ${apt_packages[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt_packages[@]}" >/dev/null
fi
# Three lanes run at once: Kubernetes; the other binaries; the bases. The
# compilers keep both cores busy while debootstrap and the module downloads
# wait on the network, so a cold build takes less than the sum of its steps
# (each step's "built in" is then its own wall time, shared with the others).
lanes=(bases kubernetes binaries)
# Each lane is a process group of its own, so that a lane that fails stops
# the others with everything they started (go build's compilers, debootstrap).
declare -A lane_of=()
stop_lanes() { local p; for p in "${!lane_of[@]}"; do kill -- "-$p" 2>/dev/null || true; done; }
trap stop_lanes EXIT
set -m
for lane in "${lanes[@]}"; do "$lane" & lane_of[$!]="$lane"; done
set +m
while (( ${#lane_of[@]} )); do
  done_pid=""
  if wait -n -p done_pid "${!lane_of[@]}"; then unset "lane_of[$done_pid]"; continue; fi
  log "${lane_of[$done_pid]:-a lane} failed (its output is above); stopping the others"
  unset "lane_of[$done_pid]"
  exit 1
done
trap - EXIT

# --- component images -------------------------------------------------------
# image NAME FROM BINARY PATH: a one-binary image.
image() {
  local name="$1" from="$2" binary="$3" path="$4" ctx
  ctx="$(mktemp -d)"
  cp "$bin/$binary" "$ctx/$binary"
  printf 'FROM %s\nCOPY %s %s\nENV PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin\nENTRYPOINT ["%s"]\n' \
    "$from" "$binary" "$path" "$path" > "$ctx/Dockerfile"
  quiet docker build -t "$name" "$ctx"
  rm -rf "$ctx"
}
K=registry.k8s.io
CNI_IMAGE="per-node.liken.sh/cni:$own_key"
images=(
  "$K/kube-apiserver:$KUBERNETES_VERSION"
  "$K/kube-controller-manager:$KUBERNETES_VERSION"
  "$K/kube-scheduler:$KUBERNETES_VERSION"
  "$K/kube-proxy:$KUBERNETES_VERSION"
  "$K/etcd:$ETCD_IMAGE_TAG"
  "$K/coredns/coredns:$COREDNS_VERSION"
  "$K/pause:$PAUSE_IMAGE_TAG"
  "$CNI_IMAGE"
)
build_images() {
  for c in kube-apiserver kube-controller-manager kube-scheduler; do
    image "$K/$c:$KUBERNETES_VERSION" scratch "$c" "/usr/local/bin/$c"
  done
  # kube-proxy programs iptables: it needs the node's iptables (nft backend).
  image "$K/kube-proxy:$KUBERNETES_VERSION" "$BASE_IMAGE" kube-proxy /usr/local/bin/kube-proxy
  image "$K/etcd:$ETCD_IMAGE_TAG" scratch etcd /usr/local/bin/etcd
  image "$K/coredns/coredns:$COREDNS_VERSION" scratch coredns /coredns
  image "$K/pause:$PAUSE_IMAGE_TAG" scratch pause /pause
  image "$CNI_IMAGE" "$BASE_IMAGE" per-node-cni /usr/local/bin/per-node-cni
}
# What kubeadm will ask for must be what versions/MINOR.env names.
check_kubeadm_images() {
  local want seen
  want="$(printf '%s\n' "${images[@]}" | grep -v "^$CNI_IMAGE$" | sort)"
  seen="$("$bin/kubeadm" config images list --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null | sort)"
  if [[ "$want" != "$seen" ]]; then
    printf 'versions/%s.env does not name the images kubeadm %s asks for.\nkubeadm asks for:\n%s\nversions/%s.env gives:\n%s\n' \
      "$minor" "$KUBERNETES_VERSION" "$seen" "$minor" "$want" >&2
    exit 1
  fi
}
# The CoreDNS built here must serve every directive of the Corefile kubeadm
# writes: one it lacks would fail the cluster's DNS, not this build.
check_coredns_plugins() {
  local want have missing=()
  want="$("$bin/kubeadm" init phase addon coredns --print-manifest --kubernetes-version "$KUBERNETES_VERSION" 2>/dev/null \
    | sed -n '/Corefile: |/,/^---/s/^        \([a-z0-9_]*\).*/\1/p' | sort -u)"
  have="$("$bin/coredns" -plugins | sed -n 's/^ *\(dns\.\)\{0,1\}\([a-z0-9_]*\)$/\2/p')"  # "cache", or "  dns.cache" before v1.12
  if [[ -z "$want" ]]; then echo "kubeadm $KUBERNETES_VERSION printed no Corefile directives" >&2; exit 1; fi
  for d in $want; do grep -qx "$d" <<<"$have" || missing+=("$d"); done
  if (( ${#missing[@]} )); then
    printf "coredns/main.go lacks the plugins of kubeadm %s's Corefile: %s\nkubeadm's Corefile uses: %s\n" \
      "$KUBERNETES_VERSION" "${missing[*]}" "$(echo $want)" >&2
    exit 1
  fi
}
check_kubeadm_images
check_coredns_plugins
images_key="$(echo "$versions_key $own_key $coredns_key $BASE_IMAGE" | sha256sum | cut -c1-12)"
missing=0
for i in "${images[@]}"; do image_exists "$i" || missing=1; done
if (( missing )); then rm -f "$out/.stamp-images"; fi
cached images "$images_key" "" build_images

# --- node image -------------------------------------------------------------
build_node() {
  local ctx="$out/node-ctx" id
  rm -rf "$ctx" && mkdir -p "$ctx/bin" "$ctx/manifests" "$ctx/files"
  cp -r "$kind_dir/images/base/files" "$ctx/kind-base"
  chmod -R u+w "$ctx/kind-base"
  cp "$here/Dockerfile.node" "$ctx/Dockerfile"
  sed "s/@PAUSE_IMAGE_TAG@/$PAUSE_IMAGE_TAG/" "$here/files/containerd-config.toml" > "$ctx/files/containerd-config.toml"
  sed "s|@CNI_IMAGE@|$CNI_IMAGE|" "$here/files/default-cni.yaml" > "$ctx/manifests/default-cni.yaml"
  cp "$here/files/default-storage.yaml" "$ctx/manifests/"
  echo "$KUBERNETES_VERSION" > "$ctx/version"
  for b in kubeadm kubelet kubectl crictl per-node-runc ptp loopback host-local portmap \
    containerd containerd-shim-runc-v2 ctr runc; do cp "$bin/$b" "$ctx/bin/"; done
  quiet docker build --build-arg BASE_IMAGE="$BASE_IMAGE" -t "$NODE_IMAGE-stage" "$ctx"

  # Preload the images into the node's containerd (namespace k8s.io), pinned
  # so kubelet's image GC leaves them alone.
  id="$(docker run -d --entrypoint sleep "$NODE_IMAGE-stage" infinity)"
  docker exec -d "$id" containerd
  docker exec "$id" bash -c 'for i in $(seq 1 50); do ctr version >/dev/null 2>&1 && exit 0; sleep 0.2; done; exit 1'
  docker save "${images[@]}" | quiet docker exec -i "$id" ctr -n k8s.io images import --all-platforms --no-unpack -
  for i in "${images[@]}"; do
    quiet docker exec "$id" ctr -n k8s.io images label "$(docker_ref "$i")" io.cri-containerd.pinned=pinned
  done
  docker exec "$id" pkill containerd
  docker exec "$id" bash -c 'while pgrep containerd >/dev/null; do sleep 0.1; done'
  docker commit --change 'ENTRYPOINT ["/usr/local/bin/entrypoint", "/sbin/init"]' --change 'CMD []' \
    "$id" "$NODE_IMAGE" >/dev/null
  docker rm -f "$id" >/dev/null
  docker rmi "$NODE_IMAGE-stage" >/dev/null
  rm -rf "$ctx"
}
# docker_ref: the fully qualified name ctr lists for a docker image name.
docker_ref() {
  case "$1" in
    */*/*|*.*/*) echo "$1" ;;
    */*) echo "docker.io/$1" ;;
    *) echo "docker.io/library/$1" ;;
  esac
}
built "$NODE_IMAGE" "node image" build_node
{
  printf '%-20s %-7s %6s  %s\n' step how seconds "ended (UTC)"
  while IFS=$'\t' read -r name how secs at; do printf '%-20s %-7s %6s  %s\n' "$name" "$how" "$secs" "$at"; done < "$steps"
  printf '%-20s %-7s %6s\n' "all" "" "$((SECONDS - build_start))"
} >&2

printf 'NODE_IMAGE=%s\n' "$NODE_IMAGE" > "$vout/images.env"
log "node image: $NODE_IMAGE"
echo "$NODE_IMAGE"
