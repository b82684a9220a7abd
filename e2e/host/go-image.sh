#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# Prints the image the driver is built in (make image): golang:<go>-bookworm
# when a registry serves it; else the offline Go image that
# e2e/nodeimage/build.sh builds here (Debian from apt's mirror and this
# machine's Go), built once and cached.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
stock="${1:-golang:1.26-bookworm}"
if docker image inspect "$stock" >/dev/null 2>&1 || timeout 60 docker pull -q "$stock" >/dev/null 2>&1; then
  echo "$stock"
  exit 0
fi
bases="$repo/_out/nodeimage/bases.env"
if [[ -f "$bases" ]]; then
  # shellcheck disable=SC1090
  source "$bases"
  if docker image inspect "$GO_IMAGE" >/dev/null 2>&1; then echo "$GO_IMAGE"; exit 0; fi
fi
echo "cannot pull $stock: building the offline Go image" >&2
BASES_ONLY=1 "$repo/e2e/nodeimage/build.sh" >&2
# shellcheck disable=SC1090
source "$bases"
echo "$GO_IMAGE"
