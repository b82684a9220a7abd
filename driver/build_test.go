// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gotest.tools/v3/assert"
)

// TestTheDriverIsBuiltWithoutGRPCTracing checks that the driver's one build
// (`make build`, which `make image` runs and whose binary the image holds)
// leaves out grpc's request tracing. golang.org/x/net/trace executes
// html/template, and a program that can call methods by name through
// reflection keeps every exported method of every type it links: with it
// the binary is 61 MB instead of 34 MB and the driver resides in ~8 MiB more
// memory on every node.
func TestTheDriverIsBuiltWithoutGRPCTracing(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	assert.NilError(t, err)
	dockerfile, err := os.ReadFile("../Dockerfile")
	assert.NilError(t, err)
	for _, tc := range []struct {
		file string
		raw  []byte
		must *regexp.Regexp
	}{
		{"Makefile", makefile, regexp.MustCompile(`(?m)^\tCGO_ENABLED=0 go build .*-tags '\$\(DRIVER_TAGS\)' .*-o bin/per-node \./driver$`)},
		{"Makefile", makefile, regexp.MustCompile(`(?m)^image: build `)},
		{"Dockerfile", dockerfile, regexp.MustCompile(`(?m)^COPY bin/per-node /usr/local/bin/per-node$`)},
	} {
		assert.Assert(t, tc.must.Match(tc.raw), "%s: the image does not hold make build's driver; no line matches %s", tc.file, tc.must)
	}
	m := regexp.MustCompile(`(?m)^DRIVER_TAGS := (\S+)$`).FindSubmatch(makefile)
	assert.Assert(t, m != nil, "Makefile: no DRIVER_TAGS line")
	tags := string(m[1])
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, ".").CombinedOutput()
	assert.NilError(t, err, "%s", out)
	deps := strings.Fields(string(out))
	for _, unwanted := range []string{"golang.org/x/net/trace", "html/template"} {
		assert.Assert(t, !slices.Contains(deps, unwanted),
			"make build builds the driver with -tags %s; expected no %s among its %d packages, seen it", tags, unwanted, len(deps))
	}
}
