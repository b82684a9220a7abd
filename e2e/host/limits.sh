#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# Raises the host's inotify limits to what several kind clusters need (never
# lowers them). Every kubelet, kube-proxy and containerd of every node opens
# inotify instances under the host's one root user; with Debian's default
# of 128 instances the second cluster's kubelets fail with "inotify_init:
# too many open files" and its workers never join (seen here with two
# 5-node clusters). The values are those kind's known-issues page gives.
set -euo pipefail
raise() {
  local key="$1" want="$2" have
  have="$(sysctl -n "$key")"
  if (( have < want )); then
    sysctl -qw "$key=$want"
    printf '[limits] %s: %s -> %s\n' "$key" "$have" "$want" >&2
  fi
}
raise fs.inotify.max_user_instances 512
raise fs.inotify.max_user_watches 524288
