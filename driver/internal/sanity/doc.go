// Package sanity runs the CSI community's conformance suite (csi-sanity)
// against the real per-node node server, over gRPC, with real bind mounts.
// It holds tests only.
package sanity
