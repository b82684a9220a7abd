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
	tags, deps := driverDeps(t, makefile)
	for _, unwanted := range []string{"golang.org/x/net/trace", "html/template"} {
		assert.Assert(t, !slices.Contains(deps, unwanted),
			"make build builds the driver with -tags %s; expected no %s among its %d packages, seen it", tags, unwanted, len(deps))
	}
}

// driverDeps is the build tags of make build and the packages the driver
// links with them.
func driverDeps(t *testing.T, makefile []byte) (tags string, deps []string) {
	t.Helper()
	m := regexp.MustCompile(`(?m)^DRIVER_TAGS := (\S+)$`).FindSubmatch(makefile)
	assert.Assert(t, m != nil, "Makefile: no DRIVER_TAGS line")
	tags = string(m[1])
	out, err := exec.Command("go", "list", "-deps", "-tags", tags, ".").CombinedOutput()
	assert.NilError(t, err, "%s", out)
	return tags, strings.Fields(string(out))
}

// TestTheDriverLinksOnlyTheCoreAPIGroup checks that the driver links the
// types of core/v1 (and of coordination/v1, the janitor's Lease: one small
// package) and no other API group: client-go's clientset, informer
// factories and their scheme register every group, and linking them made
// the binary 34 MB instead of 28 MB, which the kernel maps as the driver
// runs on every node (driver/internal/kube says how it does without).
func TestTheDriverLinksOnlyTheCoreAPIGroup(t *testing.T) {
	makefile, err := os.ReadFile("../Makefile")
	assert.NilError(t, err)
	tags, deps := driverDeps(t, makefile)
	var unwanted []string
	for _, d := range deps {
		if strings.HasPrefix(d, "k8s.io/api/") && d != "k8s.io/api/core/v1" && d != "k8s.io/api/coordination/v1" ||
			d == "k8s.io/client-go/kubernetes" || strings.HasPrefix(d, "k8s.io/client-go/kubernetes/") ||
			d == "k8s.io/client-go/informers" || strings.HasPrefix(d, "k8s.io/client-go/informers/") {
			unwanted = append(unwanted, d)
		}
	}
	assert.Assert(t, len(unwanted) == 0,
		"make build builds the driver with -tags %s; expected no API group but core/v1 and coordination/v1 and no clientset or informer factory, seen %d packages: %v",
		tags, len(unwanted), unwanted)
}
