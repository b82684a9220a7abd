// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A check's verdict is one of two kinds, and a failed step says which:
//
//   - ErrNotSeen: the check looked, and what it awaited did not hold (a
//     promise broke, or was not kept in time).
//   - ErrUnobserved: the check could not look (a read of a copy, an exec, an
//     API call failed or timed out). The tool failed, not the promise.
var (
	ErrNotSeen    = errors.New("promise not kept")
	ErrUnobserved = errors.New("could not observe")
)

// Unobserved marks err as a failed observation: Until retries it, and if
// the time runs out while the reads still fail, the error is ErrUnobserved,
// not ErrNotSeen.
func Unobserved(err error) error {
	if err == nil || errors.Is(err, ErrUnobserved) {
		return err
	}
	return unobserved{err}
}

type unobserved struct{ err error }

func (u unobserved) Error() string   { return ErrUnobserved.Error() + ": " + u.err.Error() }
func (u unobserved) Unwrap() []error { return []error{ErrUnobserved, u.err} }

// cause is what made an observation fail.
func cause(err error) error {
	if u, ok := errors.AsType[unobserved](err); ok {
		return u.err
	}
	return err
}

// MinAttempt is how long one check may take, whatever is left of the
// timeout: a read that started just before the step's deadline is not cut
// short by it, so a busy machine makes a check slower, not wrong.
var MinAttempt = 90 * time.Second

// Until calls check every interval until it reports done, fails, or timeout
// passes. check returns an error marked with Unobserved when it could not
// look; Until retries it. Every call of check has at least MinAttempt to
// answer, even past timeout, and the answer of the call that was running
// when the time ran out still counts.
//
// On timeout the error says what was awaited, for how long, and what check
// saw last; it wraps ErrUnobserved when the last call could not look (with
// the last thing it did see, if any), else ErrNotSeen.
func Until(ctx context.Context, what string, timeout time.Duration, check func(context.Context) (done bool, seen string, err error)) error {
	start := time.Now()
	end := start.Add(timeout)
	interval := 250 * time.Millisecond
	seen, failed := "nothing yet", 0
	var lastFailure error
	for {
		done, s, err := attempt(ctx, end, check)
		switch {
		case errors.Is(err, ErrUnobserved):
			failed++
			lastFailure = err
		case err != nil:
			return fmt.Errorf("%s: %w", what, err)
		default:
			failed, lastFailure = 0, nil
			if s != "" {
				seen = s
			}
		}
		if done {
			return nil
		}
		if !time.Now().Before(end) || ctx.Err() != nil {
			took := time.Since(start).Round(time.Second)
			if lastFailure != nil {
				return fmt.Errorf("%w: %s within %s: the last %d read(s) failed, the last with: %w; last seen before that: %s",
					ErrUnobserved, what, took, failed, cause(lastFailure), seen)
			}
			return fmt.Errorf("%w: timed out after %s waiting for %s; last seen: %s", ErrNotSeen, took, what, seen)
		}
		select {
		case <-ctx.Done():
		case <-time.After(min(interval, time.Until(end))):
		}
		if interval < 2*time.Second {
			interval *= 2
		}
	}
}

// attempt runs one check with a context that ends at end or MinAttempt
// from now, whichever is later; the caller's cancellation still ends it,
// its deadline does not.
func attempt(ctx context.Context, end time.Time, check func(context.Context) (bool, string, error)) (bool, string, error) {
	actx, cancel := context.WithDeadline(context.WithoutCancel(ctx), later(end, time.Now().Add(MinAttempt)))
	defer cancel()
	stop := context.AfterFunc(ctx, func() {
		if !errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
			cancel()
		}
	})
	defer stop()
	return check(actx)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
