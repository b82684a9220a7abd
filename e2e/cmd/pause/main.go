// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command pause is the sandbox process of every pod in the offline kind
// node image: it holds the pod's namespaces, reaps orphans, and exits 0 on
// SIGINT or SIGTERM.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range signals {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
