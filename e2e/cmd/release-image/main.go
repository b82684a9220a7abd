// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command release-image prints the name of the driver image a release
// pushes: the repository the chart's values name (the one place it is set),
// and `:VERSION` when given one. make release tags its image and renders
// install.yaml with it; the release workflow pushes to it.
//
//	go run ./e2e/cmd/release-image [VERSION]
package main

import (
	"flag"
	"fmt"
	"os"

	"liken.sh/per-node/e2e/internal/harness"
)

func main() {
	repo := flag.String("repo", ".", "the repository root")
	flag.Parse()
	name, err := harness.ReleaseRepository(*repo)
	if err != nil {
		fmt.Fprintln(os.Stderr, "release-image:", err)
		os.Exit(1)
	}
	if v := flag.Arg(0); v != "" {
		name += ":" + v
	}
	fmt.Println(name)
}
