// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kubernetes holds no code: its go.mod pins the Kubernetes release
// whose binaries build.sh builds for the offline kind node image.
package kubernetes
