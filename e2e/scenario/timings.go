// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"
)

// Timings keeps, per step kind, the longest time a step took and its
// default timeout, so that defaults can be kept near 3x what is measured:
// slowness then shows as a failure, not as a pass.
type Timings struct {
	mu   sync.Mutex
	kind map[string]timing
}

type timing struct {
	longest, timeout time.Duration
	where            string
	n                int
}

// observe records one step that passed.
func (t *Timings) observe(s Step, took time.Duration) {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.kind == nil {
		t.kind = map[string]timing{}
	}
	cur := t.kind[s.Kind]
	cur.n++
	if took >= cur.longest {
		cur.longest, cur.where, cur.timeout = took, s.Where(), s.Timeout
	}
	t.kind[s.Kind] = cur
}

// Report is a table: step kind, runs, longest, where, and the ratio of the
// timeout to the longest.
func (t *Timings) Report() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var kinds []string
	for k := range t.kind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-8s %-8s %s\n", "runs", "longest", "timeout", "step (where the longest was)")
	for _, k := range kinds {
		c := t.kind[k]
		fmt.Fprintf(&b, "%-8d %-8s %-8s %s (%s)\n", c.n, c.longest.Round(100*time.Millisecond), c.timeout, k, c.where)
	}
	return b.String()
}
