#!/usr/bin/env bash
# Copyright 2026 The per-node Authors.
# SPDX-License-Identifier: Apache-2.0
# make release [VERSION=v1.2.3]: what a release of VERSION is, built here with
# no registry, in _out/release/VERSION:
#
#   per-node-driver-VERSION.oci.tar  the driver image for linux/amd64 and
#                                    linux/arm64: an OCI image layout whose
#                                    index is named VERSION (push it with
#                                    `crane push`, `skopeo copy oci-archive:`
#                                    or `oras cp`)
#   per-node-VERSION.cdx.json        the driver's SBOM (CycloneDX: the modules
#                                    linked into the binary)
#   per-node-driver-VERSION.tar.gz   the host's image (docker load < it), tagged
#                                    with the release's name (below)
#   install.yaml                     deploy/ rendered with that image
#   per-node-CHART_VERSION.tgz       the Helm chart, appVersion VERSION: its
#                                    default image is the release's
#                                    (these three: release-install.sh, what an
#                                    operator installs)
#   SHA256SUMS
#
# The arm64 binary is cross-compiled (the image is a static binary on
# scratch: no emulation), and each image is checked to hold a static ELF of
# its own architecture (e2e/release, a Go module of its own).
#
# VERSION defaults to `git describe --tags` (make's VERSION). The chart's
# version is VERSION without its "v" when VERSION is SemVer, else
# 0.0.0-VERSION. The image's name is the repository the chart's values.yaml
# names, tagged VERSION (go run ./e2e/cmd/release-image VERSION): the
# release workflow pushes the OCI archive there. A mirror: push it under
# your name and set image.repository (Helm) or images: (kustomize).
set -euo pipefail
repo="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$repo"
version="${1:?usage: release.sh VERSION}"
if [[ "$version" == *dirty* && -z "${ALLOW_DIRTY:-}" ]]; then
  echo "release: the tree has uncommitted changes ($version); commit them, or ALLOW_DIRTY=1" >&2
  exit 1
fi
out="_out/release/$version"
rm -rf "$out" && mkdir -p "$out"

revision="$(git rev-parse --verify --quiet HEAD 2>/dev/null || echo unknown)"
# Each architecture through make build (its flags and tags), then the host's
# again for make image.
bins="$out/.bin"
mkdir -p "$bins"
binaries=()
for arch in amd64 arm64; do
  GOOS=linux GOARCH="$arch" make --no-print-directory build VERSION="$version"
  mv bin/per-node "$bins/per-node-linux-$arch"
  binaries+=(-binary "linux/$arch=$repo/$bins/per-node-linux-$arch")
done
# The Dockerfile's labels, so that both forms of the image say the same.
labels=()
while IFS= read -r l; do labels+=(-label "$l"); done < <(
  sed -n '/^LABEL/,/^[^ ]/p' Dockerfile | grep -o 'org\.opencontainers[^ ]*="[^"]*"' | tr -d '"' |
    sed "s/\${VERSION}/$version/; s/\${REVISION}/$revision/")
(cd e2e/release && go run . write -out "$repo/$out/.oci" -version "$version" "${labels[@]}" "${binaries[@]}")
tar -C "$out/.oci" --sort=name --mtime=@0 --owner=0 --group=0 --numeric-owner -cf "$out/per-node-driver-$version.oci.tar" .
(cd e2e/release && go tool cyclonedx-gomod app -json -output "$repo/$out/per-node-$version.cdx.json" -main driver "$repo" 2>/dev/null)
rm -rf "$out/.oci" "$bins"

# What an operator installs (scenario 45 installs these very files).
e2e/host/release-install.sh "$version" "$out"
(cd "$out" && sha256sum -- * > SHA256SUMS)
echo "release $version in $out:"
ls -l "$out" | tail -n +2
