#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# Makes sure a Docker engine runs here: installs Debian's docker.io when
# docker is absent, and starts dockerd when it is not running. Where the
# capability bounding set is smaller than the kernel's (privileged containers
# then fail with "unable to apply caps"), dockerd's default runtime becomes
# per-node-runc, which drops what the host cannot grant before calling runc.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
log() { printf '[docker %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if ! command -v dockerd >/dev/null; then
  log "installing docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi

# The bounding set lacks capabilities when it is not all ones up to cap_last_cap.
last="$(cat /proc/sys/kernel/cap_last_cap)"
full=$(( (1 << (last + 1)) - 1 ))
bnd=$(( 16#$(awk '/^CapBnd/ {print $2}' /proc/self/status) ))
shim=""
if (( bnd != full )); then
  shim=/usr/local/bin/per-node-runc
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$shim.new" ./e2e/cmd/per-node-runc && mv "$shim.new" "$shim")
  mkdir -p /etc/docker
  want="{\"runtimes\": {\"per-node-runc\": {\"path\": \"$shim\"}}, \"default-runtime\": \"per-node-runc\"}"
  if [[ "$(cat /etc/docker/daemon.json 2>/dev/null)" != "$want" ]]; then
    log "bounding set lacks capabilities: dockerd runs containers through $shim"
    echo "$want" > /etc/docker/daemon.json
    if docker info >/dev/null 2>&1; then
      log "restarting dockerd for the new runtime"
      pkill -x dockerd || true
      for _ in $(seq 1 100); do pgrep -x dockerd >/dev/null || break; sleep 0.1; done
    fi
  fi
fi

if ! docker info >/dev/null 2>&1; then
  log "starting dockerd"
  if command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; then
    systemctl start docker
  else
    nohup dockerd >/var/log/dockerd.log 2>&1 &
  fi
  for _ in $(seq 1 150); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start; see /var/log/dockerd.log"; tail -20 /var/log/dockerd.log >&2; exit 1; }
fi
log "docker $(docker version --format '{{.Server.Version}}') ready${shim:+ (runtime per-node-runc)}"
