// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// pairs is a repeatable KEY=VALUE flag.
type pairs map[string]string

func (p pairs) String() string { return fmt.Sprint(map[string]string(p)) }

func (p pairs) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" || v == "" {
		return fmt.Errorf("%q is not KEY=VALUE", s)
	}
	p[k] = v
	return nil
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "oci-image:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: oci-image write|verify ...")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	out := fs.String("out", "", "the OCI image layout to write or verify (a directory)")
	version := fs.String("version", "", "the index's name (org.opencontainers.image.ref.name)")
	labels, binaries := pairs{}, pairs{}
	fs.Var(labels, "label", "an image label KEY=VALUE (repeatable)")
	fs.Var(binaries, "binary", "PLATFORM=PATH: the driver binary for linux/amd64, linux/arm64 (repeatable)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *out == "" || *version == "" || len(binaries) == 0 {
		return fmt.Errorf("%s needs -out, -version and at least one -binary", args[0])
	}
	switch args[0] {
	case "write":
		if err := Write(*out, Spec{Version: *version, Labels: labels, Binaries: binaries}); err != nil {
			return err
		}
		return Verify(*out, *version, sortedKeys(binaries))
	case "verify":
		return Verify(*out, *version, sortedKeys(binaries))
	}
	return fmt.Errorf("unknown command %q: write or verify", args[0])
}
