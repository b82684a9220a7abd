// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package sanity runs the CSI community's conformance suite (csi-sanity)
// against the real per-node node server, over gRPC, with real bind mounts.
// It holds tests only.
package sanity
