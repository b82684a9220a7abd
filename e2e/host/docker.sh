#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# Makes sure a Docker engine runs here: installs Debian's docker.io when
# docker is absent, and starts dockerd when it is not running. Where the
# capability bounding set is smaller than the kernel's (privileged containers
# then fail with "unable to apply caps"), dockerd's default runtime becomes
# per-node-runc, which drops what the host cannot grant before calling runc:
# merged into /etc/docker/daemon.json, and dockerd restarted only through
# systemd or when this script started it.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
log() { printf '[docker %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }

if ! command -v dockerd >/dev/null; then
  log "installing docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io >/dev/null
fi

# dockerd started by this script (no service manager): its pid, so that only
# that one is ever restarted by it.
pidfile=/run/per-node-dockerd.pid
systemd() { command -v systemctl >/dev/null && systemctl is-system-running >/dev/null 2>&1; }

start_dockerd() {
  log "starting dockerd"
  if systemd; then
    systemctl start docker
  else
    nohup dockerd >/var/log/dockerd.log 2>&1 &
    echo $! > "$pidfile"
  fi
  # Up to 3 minutes: a dockerd that was killed with containers running (a
  # CI run stopped mid-suite leaves its kind nodes) cleans them up first.
  for _ in $(seq 1 900); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  docker info >/dev/null 2>&1 || { log "dockerd did not start in 3 minutes; see /var/log/dockerd.log"; tail -20 /var/log/dockerd.log >&2; exit 1; }
}

# Restarts a running dockerd for a new configuration: through systemd, or
# the dockerd this script started; any other it leaves to the operator.
restart_dockerd() {
  docker info >/dev/null 2>&1 || return 0
  if systemd; then
    log "restarting docker (systemctl) for the new runtime"
    systemctl restart docker
  elif [[ -f "$pidfile" ]] && [[ "$(cat /proc/"$(cat "$pidfile")"/comm 2>/dev/null)" == dockerd ]]; then
    log "restarting the dockerd this script started, for the new runtime"
    kill "$(cat "$pidfile")"
    for _ in $(seq 1 100); do docker info >/dev/null 2>&1 || break; sleep 0.1; done
    start_dockerd
  elif [[ -x /etc/init.d/docker ]] && command -v service >/dev/null; then
    log "restarting docker (service) for the new runtime"
    service docker restart >/dev/null
    for _ in $(seq 1 900); do docker info >/dev/null 2>&1 && break; sleep 0.2; done
  else
    log "dockerd runs outside a service manager and was not started here: restart it yourself so that it reads /etc/docker/daemon.json"
    exit 1
  fi
}

# The bounding set lacks capabilities when it is not all ones up to cap_last_cap.
# Then dockerd's default runtime becomes the shim, merged into daemon.json
# (every other setting kept).
last="$(cat /proc/sys/kernel/cap_last_cap)"
full=$(( (1 << (last + 1)) - 1 ))
bnd=$(( 16#$(awk '/^CapBnd/ {print $2}' /proc/self/status) ))
shim=""
if (( bnd != full )); then
  shim=/usr/local/bin/per-node-runc
  (cd "$repo" && CGO_ENABLED=0 go build -trimpath -o "$shim.new" ./e2e/cmd/per-node-runc && mv "$shim.new" "$shim")
  if [[ "$(cd "$repo" && go run ./e2e/cmd/docker-config "$shim")" == changed ]]; then
    log "bounding set lacks capabilities: dockerd runs containers through $shim (/etc/docker/daemon.json)"
    restart_dockerd
  fi
fi

docker info >/dev/null 2>&1 || start_dockerd
log "docker $(docker version --format '{{.Server.Version}}') ready${shim:+ (runtime per-node-runc)}"
