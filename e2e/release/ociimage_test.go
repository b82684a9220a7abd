// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"gotest.tools/v3/assert"
)

// build cross-compiles a tiny program for arch (as make release builds the
// driver), with more go build flags.
func build(t *testing.T, arch string, flags ...string) string {
	t.Helper()
	dir := t.TempDir()
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "main.go"), []byte("package main\n\nimport \"net\"\n\nvar _ = net.LookupHost\n\nfunc main() {}\n"), 0o644))
	assert.NilError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module tiny\n\ngo 1.26\n"), 0o644))
	out := filepath.Join(dir, "tiny-"+arch)
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, ".")...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+arch, "CGO_ENABLED=0", "GOFLAGS=-trimpath")
	b, err := cmd.CombinedOutput()
	assert.NilError(t, err, "%s", b)
	return out
}

// The index names both platforms, and each image holds an ELF of its own
// architecture at the entrypoint.
func TestWriteAnIndexOfBothArchitectures(t *testing.T) {
	amd64, arm64 := build(t, "amd64"), build(t, "arm64")
	dir := filepath.Join(t.TempDir(), "layout")
	spec := Spec{Version: "v0.1.0", Labels: map[string]string{"org.opencontainers.image.version": "v0.1.0"},
		Binaries: map[string]string{"linux/amd64": amd64, "linux/arm64": arm64}}
	assert.NilError(t, Write(dir, spec))
	assert.NilError(t, Verify(dir, "v0.1.0", []string{"linux/amd64", "linux/arm64"}))
	assert.ErrorIs(t, Verify(dir, "v0.1.0", []string{"linux/amd64"}), ErrBadImage, "an index that names a platform more than asked for")
	assert.ErrorIs(t, Verify(dir, "v0.2.0", []string{"linux/amd64", "linux/arm64"}), ErrBadImage, "an index of another name")
	assert.ErrorIs(t, Write(dir, spec), os.ErrExist, "a layout written over")
}

// Each bad binary is refused, and nothing is written.
func TestWriteRefusesABinaryOfAnotherPlatform(t *testing.T) {
	amd64, arm64 := build(t, "amd64"), build(t, "arm64")
	for name, binaries := range map[string]map[string]string{
		"swapped":             {"linux/amd64": arm64, "linux/arm64": amd64},
		"not an ELF":          {"linux/amd64": "ociimage.go"},
		"an unknown platform": {"linux/riscv64": amd64},
		"another OS":          {"windows/amd64": amd64},
	} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "layout")
			assert.ErrorIs(t, Write(dir, Spec{Version: "v0.1.0", Binaries: binaries}), ErrBadImage)
			_, err := os.Stat(dir)
			assert.Assert(t, os.IsNotExist(err), "a refused write left %s", dir)
		})
	}
}

// A binary that asks for a dynamic loader cannot run on scratch (a
// position-independent executable, linked by Go's own linker, asks for one).
func TestWriteRefusesADynamicBinary(t *testing.T) {
	dynamic := build(t, "amd64", "-buildmode=pie")
	err := Write(filepath.Join(t.TempDir(), "layout"), Spec{Version: "v0.1.0", Binaries: map[string]string{"linux/amd64": dynamic}})
	assert.ErrorIs(t, err, ErrBadImage)
}
