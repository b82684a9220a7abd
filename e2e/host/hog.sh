#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# hog.sh [SECONDS] [WORKERS]: keeps every core busy at the lowest priority
# for SECONDS (default 3600), as another job on a shared CI machine would:
# WORKERS (default: one per core) CPU loops at nice 19, in a session of
# their own. A new session is a new scheduling autogroup, and autogroups
# are weighed against each other before nice counts, so these loops take as
# much CPU as the suite's whole session: the load the suite must hold under.
#
#   e2e/host/hog.sh 5400 & make e2e; kill %1
#
# Stops by itself after SECONDS, or with its loops when hog.sh is killed.
set -euo pipefail
secs="${1:-3600}" workers="${2:-$(nproc)}"
echo "hog: $workers CPU loops at nice 19 in their own session for $secs s" >&2
exec setsid -w bash -c '
  trap "trap - TERM; kill 0" INT TERM
  for _ in $(seq 1 "$2"); do timeout --foreground "$1" nice -n 19 bash -c "while :; do :; done" & done
  wait' hog "$secs" "$workers"
