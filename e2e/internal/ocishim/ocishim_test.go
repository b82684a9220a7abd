// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package ocishim

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
)

func TestSpecFile(t *testing.T) {
	for _, tc := range []struct {
		args          []string
		file          string
		processAtRoot bool
	}{
		{[]string{"--root", "/run/runc", "create", "--bundle", "/b", "id"}, "/b/config.json", false},
		{[]string{"--log=/l", "create", "-b=/b", "id"}, "/b/config.json", false},
		{[]string{"run", "id"}, "config.json", false},
		{[]string{"exec", "--process", "/tmp/p.json", "id"}, "/tmp/p.json", true},
		{[]string{"--root", "/run/runc", "start", "id"}, "", false},
		{[]string{"--version"}, "", false},
	} {
		file, atRoot := specFile(tc.args)
		assert.Equal(t, file, tc.file, "args %v", tc.args)
		assert.Equal(t, atRoot, tc.processAtRoot, "args %v", tc.args)
	}
}

func TestEdit(t *testing.T) {
	host := Host{Bounding: map[string]bool{"CAP_SYS_ADMIN": true, "CAP_CHOWN": true}, OOMScoreAdj: 0}
	spec := `{"ociVersion":"1.0.2","process":{"oomScoreAdj":-998,"capabilities":{
		"bounding":["CAP_SYS_ADMIN","CAP_SYS_RESOURCE"],"effective":["CAP_CHOWN","CAP_SYS_RESOURCE"]}},
		"root":{"path":"rootfs"},"unknownField":{"kept":true}}`

	out, changed, err := Edit([]byte(spec), false, host)
	assert.NilError(t, err)
	assert.Assert(t, changed)
	var got map[string]any
	assert.NilError(t, json.Unmarshal(out, &got))
	proc := got["process"].(map[string]any)
	assert.DeepEqual(t, proc["capabilities"], map[string]any{
		"bounding": []any{"CAP_SYS_ADMIN"}, "effective": []any{"CAP_CHOWN"},
	})
	assert.Equal(t, proc["oomScoreAdj"], float64(0))
	assert.DeepEqual(t, got["unknownField"], map[string]any{"kept": true})

	// Nothing to take out: the bytes are returned untouched.
	ok := `{"process":{"oomScoreAdj":5,"capabilities":{"bounding":["CAP_CHOWN"]}}}`
	out, changed, err = Edit([]byte(ok), false, host)
	assert.NilError(t, err)
	assert.Assert(t, !changed)
	assert.Equal(t, string(out), ok)

	_, _, err = Edit([]byte("{"), false, host)
	assert.ErrorContains(t, err, "parse spec")
}

func TestEditFileExecProcess(t *testing.T) {
	file := filepath.Join(t.TempDir(), "process.json")
	assert.NilError(t, os.WriteFile(file, []byte(`{"args":["sh"],"capabilities":{"bounding":["CAP_SYS_RESOURCE"]}}`), 0o600))
	assert.NilError(t, EditFile(file, true, Host{Bounding: map[string]bool{}}))
	raw, err := os.ReadFile(file)
	assert.NilError(t, err)
	assert.Equal(t, string(raw), `{"args":["sh"],"capabilities":{"bounding":[]}}`)
}

func TestReadHost(t *testing.T) {
	h, err := ReadHost()
	assert.NilError(t, err)
	assert.Assert(t, h.Bounding["CAP_SYS_ADMIN"], "tests run as root with CAP_SYS_ADMIN")
}
