#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# make e2e-matrix: the whole suite (make e2e) on every Kubernetes minor that
# has a file in e2e/nodeimage/versions/, oldest first, one after another, each
# on its own cluster (per-node-e2e-<minor>, so a `make up` cluster is left
# alone). MINORS="1.36 1.37" runs only those; SUITE=quick runs the guide's
# core scenarios instead of all (the table says which). Prints a table (also
# written to _out/e2e-matrix.md) and exits non-zero if any minor failed.
#
# Each minor's log: _out/e2e-matrix/<minor>.log.
set -uo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
if [[ -z "${MINORS:-}" ]]; then
  MINORS="$(cd e2e/nodeimage/versions && ls 1.*.env | sed 's|\.env$||' | sort -V | tr '\n' ' ')"
fi
mkdir -p _out/e2e-matrix
rows=() failed=0 start=$SECONDS
for minor in $MINORS; do
  # shellcheck disable=SC1090
  version="$(source "e2e/nodeimage/versions/$minor.env" && echo "$KUBERNETES_VERSION")"
  log="_out/e2e-matrix/$minor.log"
  printf '[e2e-matrix %s] Kubernetes %s: make e2e (log: %s)\n' "$(date -u +%H:%M:%S)" "$version" "$log" >&2
  t=$SECONDS
  if K8S="$minor" E2E_CLUSTER="per-node-e2e-${minor//./-}" e2e/run.sh test >"$log" 2>&1; then
    result=pass
  else
    result=FAIL failed=1
  fi
  # The harness prints the phases; the suite time is the tests' own.
  suite="$(sed -n 's/^e2e: tests in //p' "$log" | tail -1)"
  image="$(sed -n 's/.*node image ready in \([0-9]* s\).*/\1/p' "$log" | tail -1)"
  scenarios="$(grep -cE '^    --- PASS: TestScenarios/[^/]+ \(' "$log")/$(grep -cE '^    --- (PASS|FAIL): TestScenarios/[^/]+ \(' "$log")"
  rows+=("| $minor | $version | ${SUITE:-all} | $result | ${scenarios} | ${suite:-none} | ${image:-cached} | $(( (SECONDS - t) / 60 )) min $(( (SECONDS - t) % 60 )) s |")
  printf '[e2e-matrix %s] Kubernetes %s: %s\n' "$(date -u +%H:%M:%S)" "$version" "$result" >&2
done
{
  echo "make e2e-matrix on $(date -u +%Y-%m-%d), $(nproc) cores: $(( (SECONDS - start) / 60 )) min in all"
  echo
  echo "| minor | Kubernetes | scenarios | result | passed | suite time | node image build | wall time |"
  echo "|---|---|---|---|---|---|---|---|"
  printf '%s\n' "${rows[@]}"
} | tee _out/e2e-matrix.md
exit "$failed"
