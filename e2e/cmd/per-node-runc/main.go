// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command per-node-runc runs containers on hosts whose capability bounding
// set is smaller than a privileged container asks for (here: no
// CAP_SYS_RESOURCE). Placed in front of runc, as dockerd's default runtime on
// the host and as containerd's runc BinaryName inside the kind nodes, it
// edits the OCI spec that runc is about to use so that it asks only for what
// the host can give, then execs the real runc:
//
//   - capabilities the bounding set lacks are removed from every set;
//   - an oomScoreAdj below this process's own is raised to it (lowering it
//     needs CAP_SYS_RESOURCE).
//
// On a host with a full bounding set and no negative oomScoreAdj requests it
// changes nothing.
package main

import (
	"fmt"
	"os"
	"syscall"

	"liken.sh/per-node/e2e/internal/ocishim"
)

func main() {
	runc, err := ocishim.FindRunc(os.Getenv("PER_NODE_RUNC"))
	if err != nil {
		fail(err)
	}
	if err := ocishim.Adjust(os.Args[1:]); err != nil {
		fail(err)
	}
	args := append([]string{runc}, os.Args[1:]...)
	if err := syscall.Exec(runc, args, os.Environ()); err != nil {
		fail(fmt.Errorf("exec %s: %w", runc, err))
	}
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "per-node-runc: %v\n", err)
	os.Exit(1)
}
