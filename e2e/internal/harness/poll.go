// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"fmt"
	"time"
)

// Until calls check every interval until it reports done, fails, or timeout
// passes. On timeout the error says what was awaited, for how long, and what
// check saw last.
func Until(ctx context.Context, what string, timeout time.Duration, check func(context.Context) (done bool, seen string, err error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	interval := 250 * time.Millisecond
	seen := "nothing yet"
	for {
		done, s, err := check(ctx)
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if s != "" {
			seen = s
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after %s waiting for %s; last seen: %s", time.Since(start).Round(time.Second), what, seen)
		case <-time.After(interval):
		}
		if interval < 2*time.Second {
			interval *= 2
		}
	}
}
