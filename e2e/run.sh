#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# make e2e / make up / make down.
#
#   e2e/run.sh test [SCENARIOS]  clusters up, driver installed, tests (or the scenarios
#                                whose names start with one of the comma-separated
#                                SCENARIOS; SUITE=quick: the guide's core) run, clusters
#                                deleted; the scenarios are shared among E2E_LANES
#                                clusters (default 2), each running one at a time
#   e2e/run.sh bench             time from deleting a PV to its disappearance
#   e2e/run.sh bench-api         the drivers' API requests at rest (50 PVs x every worker)
#   e2e/run.sh bench-scale       the design's cost with N Nodes, 20,000 other PVs, host drivers
#   e2e/run.sh bench-e2e         pod start, 200 volumes on every worker, deletion, the
#                                driver's cost: each next to a hostPath baseline
#   e2e/run.sh up                the same cluster left running (prints KUBECONFIG)
#   e2e/run.sh down              delete them (every lane's)
#
# The Kubernetes minor: $K8S (e.g. 1.37; default e2e/nodeimage/versions/default),
# whose versions are in e2e/nodeimage/versions/$K8S.env.
# The kind node image: $KIND_NODE_IMAGE if set; else kind's stock image for
# that Kubernetes version if it can be pulled; else the offline image that
# e2e/nodeimage/build.sh builds here (cached). The project's own images hold
# binaries compiled on this host (make build build-fixtures). A cluster that is already
# there must run that version (the harness checks every node).
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
cd "$repo"
log() { printf '[e2e %s] %s\n' "$(date -u +%H:%M:%S)" "$*" >&2; }
export K8S="${K8S:-$(cat e2e/nodeimage/versions/default)}"
if [[ ! -f "e2e/nodeimage/versions/$K8S.env" ]]; then
  echo "e2e/run.sh: K8S=$K8S has no e2e/nodeimage/versions/$K8S.env" >&2
  exit 2
fi
# shellcheck disable=SC1090
source "e2e/nodeimage/versions/$K8S.env"
export E2E_CLUSTER="${E2E_CLUSTER:-per-node-e2e}"
# The guide's core promises: binding, copies per node, one holder, agreement,
# moves to nodes with and without a copy, drains, copies outliving pods,
# deletion, the guide as printed, a driver upgrade.
quick="01,02,03,04,06,07,08,09,12,23,26"
export PATH="$repo/_out/bin:$PATH"
# As the Makefile: static binaries, and one compilation of each package.
export CGO_ENABLED=0

start=$SECONDS
e2e/host/docker.sh
e2e/host/limits.sh
# The quickstart's test runs docs/examples/quickstart with a stand-in for
# busybox built from Debian's static one (the cluster pulls nothing).
if ! dpkg -s busybox-static >/dev/null 2>&1; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq busybox-static >/dev/null
fi
mkdir -p _out/bin
go build -o _out/bin/kind sigs.k8s.io/kind   # the version go.mod pins

if [[ "${1:-}" == down ]]; then
  # Every lane's cluster: $E2E_CLUSTER, $E2E_CLUSTER-2, ...
  for c in $(kind get clusters 2>/dev/null | grep -xE "$E2E_CLUSTER(-[0-9]+)?" || true); do
    kind delete cluster --name "$c"
  done
  # and their Docker networks (one per cluster, named after it; kind leaves them)
  for n in $(docker network ls --format '{{.Name}}' | grep -xE "$E2E_CLUSTER(-[0-9]+)?" || true); do
    docker network rm "$n" >/dev/null
  done
  exit 0
fi

stock="kindest/node:$KUBERNETES_VERSION"
if [[ -z "${KIND_NODE_IMAGE:-}" ]]; then
  if timeout 60 docker pull -q "$stock" >/dev/null 2>&1; then
    log "using kind's stock node image $stock"
    export KIND_NODE_IMAGE="$stock"
  else
    log "cannot pull $stock: building the offline node image"
    phase=$SECONDS
    # What the run compiles on the host (the e2e test binary, the images'
    # binaries, Helm) compiles beside the node image, before any cluster
    # runs: on a cold 2-core machine, compiling it under two running
    # clusters took 11 minutes, and beside the node image adds nothing to
    # the node image's own Kubernetes lane, the longest. When the node image
    # is cached both take seconds.
    prebuild_log=_out/prebuild.log
    ( go test -tags e2e -c -o /dev/null ./e2e && make --no-print-directory build build-fixtures helm ) >"$prebuild_log" 2>&1 &
    prebuild=$!
    if ! e2e/nodeimage/build.sh >/dev/null; then kill "$prebuild" 2>/dev/null || true; exit 1; fi
    log "node image ready in $((SECONDS - phase)) s"
    if ! wait "$prebuild"; then cat "$prebuild_log" >&2; log "building the run's binaries failed (above)"; exit 1; fi
    log "the run's binaries built beside it; both ready in $((SECONDS - phase)) s"
    # shellcheck disable=SC1091
    source "_out/nodeimage/$K8S/images.env"
    export KIND_NODE_IMAGE="$NODE_IMAGE"
  fi
  # The harness refuses a cluster whose nodes run another version.
  export E2E_KUBERNETES_VERSION="$KUBERNETES_VERSION"
fi
log "Kubernetes $KUBERNETES_VERSION, node image: $KIND_NODE_IMAGE"

case "${1:-test}" in
  up)
    go run ./e2e/cmd/e2e-up
    ;;
  bench)
    go test -tags e2e,e2ebench -count=1 -timeout 30m -v -run TestDeletePVTiming ./e2e/ 2>&1 | tee _out/bench-delete.log | grep -E "^delete-pv-to-gone|^(ok|FAIL|---)"
    ;;
  bench-e2e)
    go test -tags e2e,e2ebench -count=1 -timeout 90m -v -run '^TestScale$' ./e2e/ 2>&1 | tee _out/bench-e2e.log | grep -E "^bench-e2e|^(ok|FAIL|---)"
    ;;
  bench-scale)
    go test -tags e2e,e2ebench -count=1 -timeout 90m -v -run '^TestScaleAPI$' ./e2e/ 2>&1 | tee _out/bench-scale.log | grep -E "^bench-scale|^(ok|FAIL|---)"
    ;;
  bench-api)
    go test -tags e2e,e2ebench -count=1 -timeout 60m -v -run TestAPILoad ./e2e/ 2>&1 | tee _out/bench-api.log | grep -E "^api-load|^(ok|FAIL|---)"
    ;;
  test)
    run=()
    scenarios="${2:-}"
    # SUITE=quick: the guide's core scenarios, for the inner loop (CI runs all).
    if [[ -z "$scenarios" && "${SUITE:-}" == quick ]]; then scenarios="$quick"; fi
    if [[ -n "$scenarios" ]]; then run=(-run TestScenarios); export E2E_SCENARIO="$scenarios"; fi
    export E2E_LANES="${E2E_LANES:-2}"
    go test -tags e2e -count=1 -timeout 80m -v "${run[@]}" ./e2e/ 2>&1 | tee _out/e2e.log
    ;;
  *)
    echo "usage: e2e/run.sh test [SCENARIO] | bench | bench-api | bench-e2e | bench-scale | up | down" >&2
    exit 2
    ;;
esac
log "done in $((SECONDS - start)) s"
