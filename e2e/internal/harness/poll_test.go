// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"testing"
	"time"

	"gotest.tools/v3/assert"
)

// A check's verdict must say whether the promise broke or the check could
// not look, and a slow read (a busy machine) must not turn into either.
func TestUntilTellsABrokenPromiseFromAFailedObservation(t *testing.T) {
	MinAttempt = 2 * time.Second
	t.Cleanup(func() { MinAttempt = 90 * time.Second })
	errExec := errors.New("exec: context deadline exceeded")
	errAPI := errors.New("the API server refused the request")
	// slowRead answers done after 300 ms, or fails if its context ends
	// first: a read that started just before the deadline.
	slowRead := func(ctx context.Context) (bool, string, error) {
		select {
		case <-time.After(300 * time.Millisecond):
			return true, "read in full", nil
		case <-ctx.Done():
			return false, "", Unobserved(ctx.Err())
		}
	}
	for _, tc := range []struct {
		name     string
		timeout  time.Duration
		check    func(context.Context) (bool, string, error)
		want     error // nil: done
		notWant  error
		contains string
	}{
		{name: "seen_not_to_hold_is_a_broken_promise", timeout: 300 * time.Millisecond,
			check: func(context.Context) (bool, string, error) { return false, "2 of 3 ready", nil },
			want:  ErrNotSeen, notWant: ErrUnobserved, contains: "last seen: 2 of 3 ready"},
		{name: "reads_that_keep_failing_are_a_failed_observation", timeout: 300 * time.Millisecond,
			check: func(context.Context) (bool, string, error) { return false, "", Unobserved(errExec) },
			want:  ErrUnobserved, notWant: ErrNotSeen, contains: errExec.Error()},
		{name: "a_read_that_outlasts_the_timeout_still_counts", timeout: 50 * time.Millisecond, check: slowRead},
		{name: "a_plain_error_ends_the_wait_at_once", timeout: time.Minute,
			check: func(context.Context) (bool, string, error) { return false, "", errAPI },
			want:  errAPI, notWant: ErrNotSeen},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Until(context.Background(), "the thing", tc.timeout, tc.check)
			if tc.want == nil {
				assert.NilError(t, err)
				return
			}
			assert.Assert(t, errors.Is(err, tc.want), "want %v, got %v", tc.want, err)
			assert.Assert(t, !errors.Is(err, tc.notWant), "got %v, which is also %v", err, tc.notWant)
			if tc.contains != "" {
				assert.ErrorContains(t, err, tc.contains)
			}
		})
	}
}

// The last thing seen before the reads began to fail is kept in the message.
func TestUntilKeepsWhatWasSeenBeforeTheReadsFailed(t *testing.T) {
	calls := 0
	err := Until(context.Background(), "the thing", 400*time.Millisecond, func(context.Context) (bool, string, error) {
		calls++
		if calls == 1 {
			return false, "1 of 3 copies hold it", nil
		}
		return false, "", Unobserved(errors.New("exec timed out"))
	})
	assert.Assert(t, errors.Is(err, ErrUnobserved), "got %v", err)
	assert.ErrorContains(t, err, "last seen before that: 1 of 3 copies hold it")
}

// The caller's cancellation (not its deadline) still ends a running read.
func TestUntilStopsAReadWhenTheCallerCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() { <-started; cancel() }()
	err := Until(ctx, "the thing", time.Minute, func(ctx context.Context) (bool, string, error) {
		close(started)
		<-ctx.Done()
		return false, "", Unobserved(ctx.Err())
	})
	assert.Assert(t, errors.Is(err, ErrUnobserved), "got %v", err)
	assert.Assert(t, errors.Is(err, context.Canceled), "got %v", err)
}
