// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package holders

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
)

func namesIn(t *testing.T) (*Index, *Names, func(string) string) {
	t.Helper()
	dir := t.TempDir()
	path := func(handle string) string { return filepath.Join(dir, handle) }
	i := NewIndex()
	return i, NewNames(i, path), path
}

// saved is the name at file, or "" when there is none.
func saved(t *testing.T, file string) string {
	t.Helper()
	if _, err := os.Lstat(file); errors.Is(err, fs.ErrNotExist) {
		return ""
	}
	return Load(file, "/t", "unreadable").Pod
}

func TestFlushWritesWhatTheIndexHoldsLast(t *testing.T) {
	i, n, path := namesIn(t)
	i.Set("a", Holder{Target: "/t", Pod: "ns/first"})
	n.Mark("a")
	i.Set("a", Holder{Target: "/t", Pod: "ns/second"})
	n.Mark("a")
	i.Set("b", Holder{Target: "/t", Pod: "ns/b"})
	n.Mark("b")
	n.Flush()
	assert.Equal(t, saved(t, path("a")), "ns/second")
	assert.Equal(t, saved(t, path("b")), "ns/b")

	i.Forget("a")
	n.Mark("a")
	n.Flush()
	assert.Equal(t, saved(t, path("a")), "", "a forgotten holder's name stays")
	assert.Equal(t, saved(t, path("b")), "ns/b", "an unmarked handle's name changed")

	i.Set("b", Holder{Target: "/t", Pod: "ns/unmarked"})
	n.Flush()
	assert.Equal(t, saved(t, path("b")), "ns/b", "Flush wrote a handle nobody marked")
}

func TestRunWritesAMomentAfterAMark(t *testing.T) {
	i, n, path := namesIn(t)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { n.Run(stop, 10*time.Millisecond); close(done) }()
	t.Cleanup(func() { close(stop); <-done })

	i.Set("a", Holder{Target: "/t", Pod: "ns/a"})
	n.Mark("a")
	poll.WaitOn(t, func(poll.LogT) poll.Result {
		if got := saved(t, path("a")); got != "ns/a" {
			return poll.Continue("name of a: want ns/a, saved %q", got)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Second), poll.WithDelay(5*time.Millisecond))
}

func TestNamesMarkedBeforeOrAfterStopAreWritten(t *testing.T) {
	i, n, path := namesIn(t)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { n.Run(stop, time.Hour); close(done) }()

	i.Set("before", Holder{Target: "/t", Pod: "ns/before"})
	n.Mark("before")
	close(stop)
	<-done
	assert.Equal(t, saved(t, path("before")), "ns/before", "a name pending at stop was not written")

	i.Set("after", Holder{Target: "/t", Pod: "ns/after"})
	n.Mark("after")
	assert.Equal(t, saved(t, path("after")), "ns/after", "a name marked after stop was not written at once")
}
