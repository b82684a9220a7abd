// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
)

// The shim becomes the default runtime; every other setting stays; a file
// that already says so is not written; a file that is not JSON is left alone.
func TestConfigureKeepsWhatTheFileHas(t *testing.T) {
	for _, tc := range []struct {
		name, before string
		changed      bool
		keep         map[string]any
	}{
		{"no file", "", true, nil},
		{"other settings", `{"log-driver": "journald", "runtimes": {"crun": {"path": "/usr/bin/crun"}}, "default-runtime": "crun"}`, true,
			map[string]any{"log-driver": "journald"}},
		{"already set", `{"runtimes": {"per-node-runc": {"path": "/s"}}, "default-runtime": "per-node-runc", "debug": true}`, false,
			map[string]any{"debug": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "docker", "daemon.json")
			if tc.before != "" {
				assert.NilError(t, os.MkdirAll(filepath.Dir(file), 0o755))
				assert.NilError(t, os.WriteFile(file, []byte(tc.before), 0o644))
			}
			changed, err := configure(file, "/s")
			assert.NilError(t, err)
			assert.Equal(t, changed, tc.changed)
			raw, err := os.ReadFile(file)
			assert.NilError(t, err)
			var cfg map[string]any
			assert.NilError(t, json.Unmarshal(raw, &cfg))
			assert.Equal(t, cfg["default-runtime"], "per-node-runc")
			assert.DeepEqual(t, cfg["runtimes"].(map[string]any)["per-node-runc"], map[string]any{"path": "/s"})
			for k, v := range tc.keep {
				assert.DeepEqual(t, cfg[k], v)
			}
			if tc.name == "other settings" {
				assert.DeepEqual(t, cfg["runtimes"].(map[string]any)["crun"], map[string]any{"path": "/usr/bin/crun"})
			}
		})
	}

	file := filepath.Join(t.TempDir(), "daemon.json")
	assert.NilError(t, os.WriteFile(file, []byte("{not json"), 0o644))
	_, err := configure(file, "/s")
	assert.ErrorContains(t, err, "not a JSON object")
	raw, _ := os.ReadFile(file)
	assert.Equal(t, string(raw), "{not json")
}
