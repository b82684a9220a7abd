// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"errors"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	is "gotest.tools/v3/assert/cmp"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/fixtures/store/kv"
)

func TestAgreeComparesWholeContents(t *testing.T) {
	a1 := kv.Record{ID: "a/1", Key: "k1", Value: "v1", Version: 1}
	a2 := kv.Record{ID: "a/2", Key: "k2", Value: "v2", Version: 2}
	newer := kv.Record{ID: "b/1", Key: "k1", Value: "v1-new", Version: 3}
	extra := kv.Record{ID: "c/1", Key: "x", Value: "only here", Version: 4}
	for _, tc := range []struct {
		name   string
		copies map[string][]kv.Record
		want   []kv.Record
		ok     bool
		report string
	}{
		{"same records", map[string][]kv.Record{"p": {a1, a2}, "q": {a2, a1}}, []kv.Record{a1}, true, "2 copies agree on 2 records"},
		{"a written record missing", map[string][]kv.Record{"p": {a1}, "q": {a1}}, []kv.Record{a1, a2}, false, "p lacks 1 of 2 written records"},
		{"a record only one copy holds", map[string][]kv.Record{"p": {a1, extra}, "q": {a1}}, []kv.Record{a1}, false, "only in p: 1 [c/1]"},
		{"a key whose value differs", map[string][]kv.Record{"p": {a1, newer}, "q": {a1}}, []kv.Record{a1}, false, "keys with different current values: 1 [k1]"},
		{"a written value changed", map[string][]kv.Record{"p": {{ID: "a/1", Key: "k1", Value: "cut"}}}, []kv.Record{a1}, false, `held as "cut"`},
		{"a written key superseded by a newer write is held", map[string][]kv.Record{"p": {a1, newer}, "q": {newer, a1}}, []kv.Record{a1}, true, "agree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			named := map[string]contents{}
			for n, recs := range tc.copies {
				named[n] = contentsOf(recs)
			}
			ok, report := agree(named, tc.want)
			assert.Equal(t, ok, tc.ok, report)
			assert.Check(t, is.Contains(report, tc.report))
		})
	}
}

func TestLongestGapCountsFromStartToStop(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	w := &writer{start: t0, ackTimes: []time.Time{t0.Add(time.Second), t0.Add(2 * time.Second), t0.Add(9 * time.Second)}}
	gap, at := w.longestGap(t0.Add(10 * time.Second))
	assert.Equal(t, gap, 7*time.Second)
	assert.Equal(t, at, t0.Add(2*time.Second))
	none := &writer{start: t0}
	gap, _ = none.longestGap(t0.Add(30 * time.Second))
	assert.Equal(t, gap, 30*time.Second, "no acknowledged write at all is one long gap")
}

// A count found on disk at start that the step does not expect is a broken
// promise, not a failed action (unbound-copy-adopted said INCONCLUSIVE).
func TestAnUnexpectedCountFoundAtStartIsABrokenPromise(t *testing.T) {
	err := foundCount("p", storeStatus{RecordsOnDiskAtStart: 20}, "=", 0)
	assert.Assert(t, errors.Is(err, harness.ErrNotSeen), "got %v", err)
	assert.NilError(t, foundCount("p", storeStatus{RecordsOnDiskAtStart: 0}, "=", 0))
	assert.Assert(t, !errors.Is(foundCount("p", storeStatus{}, "~", 0), harness.ErrNotSeen), "an unknown comparison is not a broken promise")
}
