// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package node

import (
	"flag"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

// TestMain keeps klog quiet unless -v is given, so failures stand out.
func TestMain(m *testing.M) {
	fs := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(fs)
	flag.Parse()
	if !testing.Verbose() {
		_ = fs.Set("logtostderr", "false")
		_ = fs.Set("alsologtostderr", "false")
		_ = fs.Set("stderrthreshold", "FATAL")
		klog.SetOutput(discard{})
	}
	os.Exit(m.Run())
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
