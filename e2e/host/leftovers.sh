#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# Removes the kind clusters an earlier run left (a run stopped mid-suite
# when its session ended leaves its clusters, their containers killed with
# dockerd), and never fails: .ci/run calls it before anything else runs.
#
# A cluster kind cannot delete is removed by hand, polled until Docker lists
# none of its containers. A leftover that Docker will not remove (seen: the
# removal's exit code 123 ended a CI run before it started) is left where it
# is: then this script prints a cluster name of the run's own on stdout, for
# E2E_CLUSTER, so that the run neither reuses nor collides with it. Stopped
# containers cost disk, not CPU. It prints nothing when every leftover went.
#
# KIND is the kind binary (default: kind on PATH); LEFTOVER_TRIES and
# LEFTOVER_WAIT_SECONDS set how long a removal is retried (6 × 5 s).
set -uo pipefail
kind="${KIND:-kind}"
tries="${LEFTOVER_TRIES:-6}"
wait="${LEFTOVER_WAIT_SECONDS:-5}"

containers() { docker ps -aq --filter "label=io.x-k8s.kind.cluster=$1" 2>/dev/null; }

stuck=""
for c in $("$kind" get clusters 2>/dev/null); do
  "$kind" delete cluster --name "$c" >&2 && continue
  echo "kind could not delete cluster $c: removing its containers and network" >&2
  for ((i = 0; i < tries; i++)); do
    ids="$(containers "$c")"
    [[ -n "$ids" ]] || break
    # shellcheck disable=SC2086
    docker rm -f -v $ids >/dev/null || echo "docker rm of cluster $c's containers failed (above); trying again in $wait s" >&2
    sleep "$wait"
  done
  docker network rm "$c" >/dev/null 2>&1
  if [[ -n "$(containers "$c")" ]]; then
    echo "cluster $c's containers cannot be removed (docker ps -a --filter label=io.x-k8s.kind.cluster=$c): left as they are" >&2
    stuck="$c"
  fi
done
if [[ -n "$stuck" ]]; then
  echo "per-node-ci-$(date -u +%Y%m%d%H%M%S)"
fi
exit 0
