// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command docker-config makes dockerd's default runtime the per-node-runc
// shim in /etc/docker/daemon.json, keeping every other setting the file
// has. It prints "changed" when it rewrote the file and "unchanged" when the
// file already said so; e2e/host/docker.sh restarts dockerd only on the first.
//
//	docker-config [-file /etc/docker/daemon.json] SHIM-PATH
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

const runtime = "per-node-runc"

func main() {
	file := flag.String("file", "/etc/docker/daemon.json", "dockerd's configuration file")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: docker-config [-file F] SHIM-PATH")
		os.Exit(2)
	}
	changed, err := configure(*file, flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "docker-config:", err)
		os.Exit(1)
	}
	if changed {
		fmt.Println("changed")
	} else {
		fmt.Println("unchanged")
	}
}

// configure sets the shim as a runtime and the default runtime in file,
// creating it if need be, and reports whether it wrote anything.
func configure(file, shim string) (bool, error) {
	old, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return false, err
	}
	cfg := map[string]any{}
	if len(bytes.TrimSpace(old)) > 0 {
		if err := json.Unmarshal(old, &cfg); err != nil {
			return false, fmt.Errorf("%s is not a JSON object (fix it by hand; nothing was changed): %w", file, err)
		}
	}
	runtimes, _ := cfg["runtimes"].(map[string]any)
	if runtimes == nil {
		runtimes = map[string]any{}
	}
	entry, _ := runtimes[runtime].(map[string]any)
	if entry["path"] == shim && cfg["default-runtime"] == runtime {
		return false, nil
	}
	runtimes[runtime] = map[string]any{"path": shim}
	cfg["runtimes"], cfg["default-runtime"] = runtimes, runtime
	out, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return false, err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return false, err
	}
	tmp := file + ".per-node"
	if err := os.WriteFile(tmp, append(out, '\n'), 0o644); err != nil {
		return false, err
	}
	return true, os.Rename(tmp, file)
}
