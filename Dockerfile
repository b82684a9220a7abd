# The per-node.liken.sh driver image: one static binary.
#
# The binary is compiled once, on the host, by `make build` (bin/per-node,
# with the build tags and flags the Makefile sets); `make image` builds it and
# then this image, so the image holds exactly what the tests ran and nothing
# is compiled a second time inside Docker. The driver makes its bind mounts
# with mount(2) and never execs mount(8), so the runtime needs nothing but the
# binary: `scratch` is the default base and needs no registry.
ARG BASE_IMAGE=scratch
FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="per-node" \
      org.opencontainers.image.description="The per-node.liken.sh CSI driver: every node keeps its own copy of a volume" \
      org.opencontainers.image.source="https://github.com/liken-sh/per-node" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY bin/per-node /usr/local/bin/per-node
ENTRYPOINT ["/usr/local/bin/per-node"]
