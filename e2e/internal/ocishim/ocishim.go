// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package ocishim edits the OCI runtime spec runc is about to use, so that
// privileged containers run on hosts with a reduced capability bounding set.
// See e2e/cmd/per-node-runc.
package ocishim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/moby/sys/capability"
)

// FindRunc returns the real runc: override if set, else the first runc found
// where Debian and upstream install it.
func FindRunc(override string) (string, error) {
	candidates := []string{"/usr/sbin/runc", "/usr/bin/runc", "/usr/local/sbin/runc", "/usr/local/bin/runc"}
	if override != "" {
		candidates = []string{override}
	}
	self, _ := os.Executable()
	for _, c := range candidates {
		if c == self {
			continue
		}
		if fi, err := os.Stat(c); err == nil && !fi.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("no runc found in %v", candidates)
}

// Host is what this host can grant.
type Host struct {
	// Bounding holds the names ("CAP_SYS_ADMIN") in the bounding set.
	Bounding map[string]bool
	// OOMScoreAdj is this process's oom_score_adj, the lowest a child may get
	// without CAP_SYS_RESOURCE.
	OOMScoreAdj int
}

// ReadHost reads the bounding set and oom_score_adj of this process.
func ReadHost() (Host, error) {
	caps, err := capability.NewPid2(0)
	if err != nil {
		return Host{}, fmt.Errorf("read capabilities: %w", err)
	}
	if err := caps.Load(); err != nil {
		return Host{}, fmt.Errorf("read capabilities: %w", err)
	}
	h := Host{Bounding: map[string]bool{}}
	for _, c := range capability.ListKnown() {
		if caps.Get(capability.BOUNDING, c) {
			h.Bounding["CAP_"+strings.ToUpper(c.String())] = true
		}
	}
	raw, err := os.ReadFile("/proc/self/oom_score_adj")
	if err != nil {
		return Host{}, fmt.Errorf("read oom_score_adj: %w", err)
	}
	if h.OOMScoreAdj, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
		return Host{}, fmt.Errorf("parse oom_score_adj: %w", err)
	}
	return h, nil
}

// Adjust edits the spec named by runc's arguments, if any: the bundle's
// config.json for create and run, the --process file for exec.
func Adjust(args []string) error {
	file, processAtRoot := specFile(args)
	if file == "" {
		return nil
	}
	host, err := ReadHost()
	if err != nil {
		return err
	}
	if len(host.Bounding) == len(capability.ListKnown()) && host.OOMScoreAdj <= -1000 {
		return nil // nothing this host cannot grant
	}
	return EditFile(file, processAtRoot, host)
}

// specFile finds the spec runc will read. processAtRoot is true for exec's
// process.json, whose top level is the process object.
func specFile(args []string) (file string, processAtRoot bool) {
	// runc's global flags that take a value, as in "runc --root /run/runc create".
	globalWithValue := map[string]bool{"--root": true, "--log": true, "--log-format": true, "--criu": true, "--rootless": true}
	command, bundle, process := "", ".", ""
	for i := 0; i < len(args); i++ {
		a := args[i]
		if command == "" {
			switch {
			case globalWithValue[a]:
				i++
			case !strings.HasPrefix(a, "-"):
				command = a
			}
			continue
		}
		name, v, hasValue := strings.Cut(a, "=")
		if !hasValue && i+1 < len(args) {
			v = args[i+1]
		}
		switch name {
		case "--bundle", "-b":
			bundle = v
		case "--process", "-p":
			process = v
		}
	}
	switch command {
	case "create", "run":
		return filepath.Join(bundle, "config.json"), false
	case "exec":
		return process, true
	}
	return "", false
}

// EditFile rewrites file in place with Edit.
func EditFile(file string, processAtRoot bool, host Host) error {
	raw, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("read spec: %w", err)
	}
	out, changed, err := Edit(raw, processAtRoot, host)
	if err != nil || !changed {
		return err
	}
	fi, err := os.Stat(file)
	if err != nil {
		return err
	}
	return os.WriteFile(file, out, fi.Mode().Perm())
}

// Edit returns the spec with what host cannot grant taken out. Every other
// field is kept as it was.
func Edit(raw []byte, processAtRoot bool, host Host) ([]byte, bool, error) {
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return nil, false, fmt.Errorf("parse spec: %w", err)
	}
	proc := doc
	if !processAtRoot {
		p, ok := doc["process"].(map[string]any)
		if !ok {
			return raw, false, nil
		}
		proc = p
	}
	changed := dropCaps(proc, host.Bounding)
	if adj, ok := proc["oomScoreAdj"].(float64); ok && int(adj) < host.OOMScoreAdj {
		proc["oomScoreAdj"] = host.OOMScoreAdj
		changed = true
	}
	if !changed {
		return raw, false, nil
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, false, errors.Join(errors.New("write spec"), err)
	}
	return out, true, nil
}

func dropCaps(proc map[string]any, bounding map[string]bool) bool {
	sets, ok := proc["capabilities"].(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for name, v := range sets {
		list, ok := v.([]any)
		if !ok {
			continue
		}
		kept := make([]any, 0, len(list))
		for _, c := range list {
			if s, ok := c.(string); ok && !bounding[s] {
				changed = true
				continue
			}
			kept = append(kept, c)
		}
		sets[name] = kept
	}
	return changed
}
