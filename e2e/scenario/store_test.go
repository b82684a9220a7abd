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

// TestLongestWaitIsTheStoresNotTheWriters: the writer's own time between
// writes (its samples) is never a wait for the store; a refusal opens a
// wait that only an acknowledgment closes.
func TestLongestWaitIsTheStoresNotTheWriters(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(from, to float64, o outcome) attempt {
		sec := func(f float64) time.Time { return t0.Add(time.Duration(f * float64(time.Second))) }
		return attempt{start: sec(from), end: sec(to), outcome: o}
	}
	took := func(a attempt, d time.Duration) attempt { a.storeTook = d; return a }
	for _, tc := range []struct {
		name     string
		attempts []attempt
		stop     float64
		want     time.Duration
		from     float64
	}{
		{"acknowledged writes 6 s apart: each waited its own time", []attempt{at(0, 1, acked), at(7, 7.5, acked), at(13, 15, acked)}, 20, 2 * time.Second, 13},
		{"a refusal waits until the next acknowledgment", []attempt{at(0, 1, acked), at(2, 3, refused), at(9, 10, acked)}, 20, 8 * time.Second, 2},
		{"refusals in a row count from the first", []attempt{at(0, 1, acked), at(2, 3, refused), at(4, 5, refused), at(6, 6.5, acked)}, 20, 4500 * time.Millisecond, 2},
		{"an unobserved write after a refusal keeps the wait open", []attempt{at(0, 1, acked), at(2, 3, refused), at(4, 34, unobserved), at(35, 36, acked)}, 40, 34 * time.Second, 2},
		{"an unobserved write alone opens no wait", []attempt{at(0, 1, acked), at(2, 32, unobserved), at(33, 34, acked)}, 40, time.Second, 0},
		{"a refusal with no acknowledgment after runs to the stop", []attempt{at(0, 1, acked), at(2, 3, refused)}, 30, 28 * time.Second, 2},
		// Seen under the hog: one write's exec took 5.1 s, the store 10 ms of it.
		{"an acknowledged write waited the store's own time, not its exec's", []attempt{at(0, 1, acked), took(at(2, 7.1, acked), 10*time.Millisecond)}, 10, time.Second, 0},
		{"after a refusal the wait runs to the acknowledgment's answer", []attempt{at(2, 3, refused), took(at(4, 9, acked), 10*time.Millisecond)}, 10, 7 * time.Second, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &writer{start: t0, attempts: tc.attempts}
			for _, a := range tc.attempts {
				if a.outcome == acked {
					w.ackTimes = append(w.ackTimes, a.end)
				}
			}
			gap, from := w.longestWait(t0.Add(time.Duration(tc.stop * float64(time.Second))))
			assert.Equal(t, gap, tc.want)
			assert.Equal(t, from, t0.Add(time.Duration(tc.from*float64(time.Second))))
		})
	}
	none := &writer{start: t0, attempts: []attempt{at(1, 2, refused)}}
	gap, _ := none.longestWait(t0.Add(30 * time.Second))
	assert.Equal(t, gap, 30*time.Second, "a writer that got no acknowledgment at all waited from its start")
}

// A count found on disk at start that the step does not expect is a broken
// promise, not a failed action (unbound-copy-adopted said INCONCLUSIVE).
func TestAnUnexpectedCountFoundAtStartIsABrokenPromise(t *testing.T) {
	err := foundCount("p", storeStatus{RecordsOnDiskAtStart: 20}, "=", 0)
	assert.Assert(t, errors.Is(err, harness.ErrNotSeen), "got %v", err)
	assert.NilError(t, foundCount("p", storeStatus{RecordsOnDiskAtStart: 0}, "=", 0))
	assert.Assert(t, !errors.Is(foundCount("p", storeStatus{}, "~", 0), harness.ErrNotSeen), "an unknown comparison is not a broken promise")
}
