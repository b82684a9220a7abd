// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package rpcserver

import (
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
)

func TestSocketPath(t *testing.T) {
	for _, tc := range []struct {
		endpoint, want, err string
	}{
		{"unix:///csi/csi.sock", "/csi/csi.sock", ""},
		{"/csi/csi.sock", "/csi/csi.sock", ""},
		{"tcp://127.0.0.1:10000", "", "only unix://"},
		{"unix://relative.sock", "", "absolute"},
	} {
		t.Run(tc.endpoint, func(t *testing.T) {
			got, err := SocketPath(tc.endpoint)
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			assert.NilError(t, err)
			assert.Equal(t, got, tc.want)
		})
	}
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "csi.sock")
	assert.NilError(t, os.MkdirAll(filepath.Dir(path), 0o750))
	assert.NilError(t, os.WriteFile(path, nil, 0o600)) // left by a crash
	l, err := Listen(path)
	assert.NilError(t, err)
	assert.NilError(t, l.Close())
}
