// The module root of the kubernetes build: build.sh builds with -modfile=MINOR.mod
// (written by ../pin.sh from ../versions/MINOR.env), never with this file.
module liken.sh/per-node/e2e/nodeimage/kubernetes

go 1.25.0
