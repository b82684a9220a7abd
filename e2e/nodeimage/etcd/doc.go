// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package etcd holds no code: its go.mod pins the etcd release build.sh
// builds for the offline kind node image.
package etcd
