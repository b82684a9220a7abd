#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# release-install.sh VERSION OUT: the part of make release an operator
# installs, written to OUT (make release calls it; scenario 45 installs what
# it writes on a kind cluster):
#
#   per-node-driver-VERSION.tar.gz   the host's image (docker load < it), named
#                                    the release's image: the repository the
#                                    chart's values.yaml names, tagged VERSION
#                                    (go run ./e2e/cmd/release-image VERSION)
#   install.yaml                     deploy/ rendered with that image
#   per-node-CHART_VERSION.tgz       the Helm chart, appVersion VERSION: its
#                                    default image is the release's
#
# The chart's version is VERSION without its "v" when VERSION is SemVer,
# else 0.0.0-VERSION.
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
version="${1:?usage: release-install.sh VERSION OUT}"
out="${2:?usage: release-install.sh VERSION OUT}"
if [[ "$version" =~ ^v?([0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?)$ ]]; then
  chart_version="${BASH_REMATCH[1]}"
else
  chart_version="0.0.0-${version//[^0-9A-Za-z.-]/-}"
fi
image="$(go run ./e2e/cmd/release-image "$version")"
mkdir -p "$out"
make --no-print-directory image IMAGE="$image" VERSION="$version"
docker save "$image" | gzip > "$out/per-node-driver-$version.tar.gz"
go run ./e2e/cmd/render-deploy --image "$image" > "$out/install.yaml"
make --no-print-directory helm
_out/bin/helm package charts/per-node --version "$chart_version" --app-version "$version" --destination "$out" >/dev/null
