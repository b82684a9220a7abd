// The module root of the CoreDNS build: build.sh builds with -modfile=MINOR.mod
// (written by ../pin.sh from ../versions/MINOR.env), never with this file.
module liken.sh/per-node/e2e/nodeimage/coredns

go 1.25.0
