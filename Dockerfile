# The per-node.liken.sh driver image: one static binary.
#
# GO_IMAGE is the build stage (any image with Go at /usr/local/go/bin and a
# shell); BASE_IMAGE is the runtime base. The driver makes its bind mounts
# with mount(2) and never execs mount(8), so the runtime needs nothing but
# the binary: `scratch` is the default and needs no registry. `make e2e`
# passes images it built itself when no registry can be reached.
ARG GO_IMAGE=golang:1.26-bookworm
ARG BASE_IMAGE=scratch

FROM ${GO_IMAGE} AS build
ENV PATH=/usr/local/go/bin:$PATH CGO_ENABLED=0 GOFLAGS=-trimpath
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY driver/ driver/
ARG VERSION=dev
# grpcnotrace: see DRIVER_TAGS in the Makefile (the binary's size and memory).
ARG GO_TAGS=grpcnotrace
RUN go build -tags "${GO_TAGS}" -ldflags "-s -w -X main.version=${VERSION}" -o /out/per-node ./driver

FROM ${BASE_IMAGE}
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="per-node" \
      org.opencontainers.image.description="The per-node.liken.sh CSI driver: every node keeps its own copy of a volume" \
      org.opencontainers.image.source="https://github.com/liken-sh/per-node" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/per-node /usr/local/bin/per-node
ENTRYPOINT ["/usr/local/bin/per-node"]
