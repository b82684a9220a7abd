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

// TestTheDriverIsBuiltWithoutGRPCTracing checks that both builds of the
// driver (the image's and `make build`) leave out grpc's request tracing.
// golang.org/x/net/trace executes html/template, and a program that can
// call methods by name through reflection keeps every exported method of
// every type it links: with it the binary is 61 MB instead of 34 MB and
// the driver resides in ~8 MiB more memory on every node.
func TestTheDriverIsBuiltWithoutGRPCTracing(t *testing.T) {
	for _, tc := range []struct {
		file       string
		tags, uses *regexp.Regexp
	}{
		{"../Dockerfile", regexp.MustCompile(`(?m)^ARG GO_TAGS=(\S+)$`), regexp.MustCompile(`(?m)^RUN go build -tags "\$\{GO_TAGS\}" .* \./driver$`)},
		{"../Makefile", regexp.MustCompile(`(?m)^DRIVER_TAGS := (\S+)$`), regexp.MustCompile(`(?m)^\tCGO_ENABLED=0 go build .*-tags '\$\(DRIVER_TAGS\)' .* \./driver$`)},
	} {
		t.Run(strings.TrimPrefix(tc.file, "../"), func(t *testing.T) {
			raw, err := os.ReadFile(tc.file)
			assert.NilError(t, err)
			m := tc.tags.FindSubmatch(raw)
			assert.Assert(t, m != nil, "%s: no line matches %s", tc.file, tc.tags)
			assert.Assert(t, tc.uses.Match(raw), "%s: the driver's go build does not use the tags; no line matches %s", tc.file, tc.uses)
			tags := string(m[1])
			out, err := exec.Command("go", "list", "-deps", "-tags", tags, ".").CombinedOutput()
			assert.NilError(t, err, "%s", out)
			deps := strings.Fields(string(out))
			for _, unwanted := range []string{"golang.org/x/net/trace", "html/template"} {
				assert.Assert(t, !slices.Contains(deps, unwanted),
					"%s builds the driver with -tags %s; expected no %s among its %d packages, seen it", tc.file, tags, unwanted, len(deps))
			}
		})
	}
}
