#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# make release [VERSION=v1.2.3]: what a release of VERSION is, built here with
# no registry, in _out/release/VERSION:
#
#   per-node-driver-VERSION.tar.gz   the driver image (docker load < it), tagged
#                                    per-node.liken.sh/driver:VERSION
#   install.yaml                     deploy/ rendered with that image
#   per-node-CHART_VERSION.tgz       the Helm chart, appVersion VERSION
#   SHA256SUMS
#
# VERSION defaults to `git describe --tags` (make's VERSION). The chart's
# version is VERSION without its "v" when VERSION is SemVer, else
# 0.0.0-VERSION. Push the image to your registry under the same tag, or
# retag it and set image.repository (Helm) or images: (kustomize).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
version="${1:?usage: release.sh VERSION}"
if [[ "$version" == *dirty* && -z "${ALLOW_DIRTY:-}" ]]; then
  echo "release: the tree has uncommitted changes ($version); commit them, or ALLOW_DIRTY=1" >&2
  exit 1
fi
if [[ "$version" =~ ^v?([0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.+-]+)?)$ ]]; then
  chart_version="${BASH_REMATCH[1]}"
else
  chart_version="0.0.0-${version//[^0-9A-Za-z.-]/-}"
fi
image="per-node.liken.sh/driver:$version"
out="_out/release/$version"
rm -rf "$out" && mkdir -p "$out"

make --no-print-directory image IMAGE="$image" VERSION="$version"
docker save "$image" | gzip > "$out/per-node-driver-$version.tar.gz"
go run ./e2e/cmd/render-deploy --image "$image" > "$out/install.yaml"
make --no-print-directory helm
_out/bin/helm package charts/per-node --version "$chart_version" --app-version "$version" --destination "$out" >/dev/null
(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release $version in $out:"
ls -l "$out" | tail -n +2
