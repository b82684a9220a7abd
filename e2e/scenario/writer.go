// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/fixtures/store/kv"
)

// writer writes to the store while a scenario disrupts it. It records the
// result and time of every write, and at every sample reads the last
// acknowledged key from every store pod that is not terminating: a copy
// serves when it answers that read with that value. Serving is measured
// by traffic, not by pod readiness.
type writer struct {
	// through, when set, is the one pod the writer writes through; reads
	// are still sampled from every pod.
	through string
	// fixed, when set, are the pods the writer uses for its whole run,
	// reached through their nodes' container runtime: it needs no API
	// server.
	fixed  []corev1.Pod
	cancel context.CancelFunc
	done   chan struct{}
	start  time.Time

	mu         sync.Mutex
	acked      []kv.Record
	ackTimes   []time.Time
	attempts   []attempt
	failed     int
	unobserved int // writes whose outcome could not be seen (the exec failed or timed out)
	lastErr    string
	samples    int
	minServing int    // the fewest copies not seen to fail a read, over all samples
	worst      string // the sample with the fewest copies serving
	unreadable int    // reads that could not be made (exec failed or timed out)
}

// stepStartNodeWriter starts a writer that reaches the store pods there are
// now through their nodes, not through the API server.
func stepStartNodeWriter(ctx context.Context, r *Run, a args) error {
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return fmt.Errorf("no ready store pod to write through: %s", r.podsReport(ctx))
	}
	return r.startWriter(a["as"], &writer{fixed: pods})
}

func stepStartWriter(_ context.Context, r *Run, a args) error {
	return r.startWriter(a["as"], &writer{through: a["pod"]})
}

func (r *Run) startWriter(name string, w *writer) error {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done, w.start, w.minServing = cancel, make(chan struct{}), time.Now(), -1
	r.writers[name] = w
	r.vars[name] = name
	go w.run(ctx, r, name)
	return nil
}

func (w *writer) run(ctx context.Context, r *Run, name string) {
	defer close(w.done)
	for i := 0; ctx.Err() == nil; i++ {
		pods, err := w.pods(ctx, r)
		if err != nil {
			_ = sleep(ctx, 100*time.Millisecond)
			continue
		}
		var live []corev1.Pod
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				live = append(live, p)
			}
		}
		w.sample(ctx, r, live)
		switch {
		case w.through != "":
			w.write(ctx, r, w.through, name+"-"+strconv.Itoa(i))
		case len(live) > 0:
			w.write(ctx, r, live[i%len(live)].Name, name+"-"+strconv.Itoa(i))
		}
		_ = sleep(ctx, 100*time.Millisecond)
	}
}

func (w *writer) pods(ctx context.Context, r *Run) ([]corev1.Pod, error) {
	if w.fixed != nil {
		return w.fixed, nil
	}
	return r.storePods(ctx)
}

// exec runs the store's client in pod: through the API server, or for a
// writer with fixed pods, through the pod's node.
func (w *writer) exec(ctx context.Context, r *Run, pod string, args ...string) (string, error) {
	for _, p := range w.fixed {
		if p.Name == pod {
			return r.execStoreOnNode(ctx, p, args...)
		}
	}
	return r.execStore(ctx, pod, args...)
}

// writeLimit bounds one write's exec. The store's client gives up on its
// own after 10 s and says so (a refusal), so a write that reaches this
// limit was slowed by the exec's path (docker, crictl, a busy machine): its
// outcome is unobserved, not a refusal.
const writeLimit = 30 * time.Second

// attempt is one write: when it was sent, when its answer came, and what
// the answer was.
type attempt struct {
	start, end time.Time
	outcome    outcome
	// storeTook is how long the store took to acknowledge, as its client
	// beside it in the pod saw it; zero when it did not say.
	storeTook time.Duration
}

type outcome int

const (
	acked      outcome = iota // the store acknowledged the write
	refused                   // the store answered, and did not acknowledge
	unobserved                // no answer seen: the exec failed or timed out
)

func (w *writer) write(ctx context.Context, r *Run, pod, key string) {
	start := time.Now()
	wctx, cancel := context.WithTimeout(ctx, writeLimit)
	defer cancel()
	out, err := w.exec(wctx, r, pod, "put-timed", key)
	var timed kv.Timed
	if err == nil {
		if perr := json.Unmarshal([]byte(strings.TrimSpace(out)), &timed); perr != nil || timed.Record.Check() != nil {
			err = fmt.Errorf("put-timed %s in %s: not a timed record: %q", key, pod, out)
		}
	}
	end := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err == nil:
		w.acked = append(w.acked, timed.Record)
		w.ackTimes = append(w.ackTimes, end)
		w.attempts = append(w.attempts, attempt{start: start, end: end, outcome: acked, storeTook: timed.Took})
	case ctx.Err() != nil:
		// the writer was stopped mid-write: no outcome to judge
	case errors.Is(err, harness.ErrUnobserved):
		w.unobserved++
		w.lastErr = fmt.Sprint(err)
		w.attempts = append(w.attempts, attempt{start: start, end: end, outcome: unobserved})
	default:
		w.failed++
		w.lastErr = fmt.Sprint(err)
		w.attempts = append(w.attempts, attempt{start: start, end: end, outcome: refused})
	}
}

// sampleRead is how long one read of a sample may take: a read that could
// not be made in time is counted as unreadable, never as a copy that does
// not serve.
const sampleRead = 30 * time.Second

// sampleAge: a sample reads the newest write acknowledged at least this
// long before, which every copy serving then was sent at once.
const sampleAge = time.Second

// sample reads, from every live pod at once and from its own copy alone (no
// read repair: a copy that lacks the write does not serve it), the newest
// write acknowledged at least sampleAge before. A copy fails the sample
// when it answers with anything but the acknowledged value; a read that
// could not be made (the exec failed or timed out) proves nothing either
// way and counts as neither.
func (w *writer) sample(ctx context.Context, r *Run, live []corev1.Pod) {
	w.mu.Lock()
	i := sort.Search(len(w.ackTimes), func(i int) bool { return w.ackTimes[i].After(time.Now().Add(-sampleAge)) }) - 1
	if i < 0 {
		w.mu.Unlock()
		return
	}
	last := w.acked[i]
	w.mu.Unlock()
	answers := make([]string, len(live))
	unread := make([]bool, len(live))
	var wg sync.WaitGroup
	for j, p := range live {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, sampleRead)
			defer cancel()
			out, err := w.exec(rctx, r, p.Name, "get-local", last.Key)
			switch {
			case errors.Is(err, harness.ErrUnobserved):
				unread[j] = true
				answers[j] = p.Name + " (could not read): " + strings.TrimSpace(err.Error())
			case err != nil:
				answers[j] = p.Name + ": " + strings.TrimSpace(err.Error())
			case out != last.Value:
				answers[j] = fmt.Sprintf("%s: answered %q, acknowledged %q", p.Name, out, last.Value)
			}
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	serving, unreadable := 0, 0
	for j, a := range answers {
		switch {
		case unread[j]:
			unreadable++
		case a == "":
			serving++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	w.unreadable += unreadable
	if notFailed := serving + unreadable; w.minServing < 0 || notFailed < w.minServing {
		w.minServing = notFailed
		w.worst = fmt.Sprintf("at %s, %d of %d live pods served %s, %d could not be read (%s)", time.Now().Format(time.TimeOnly), serving, len(live),
			last.Key, unreadable, strings.Join(nonEmpty(answers), "; "))
	}
}

func nonEmpty(s []string) []string {
	var out []string
	for _, x := range s {
		if x != "" {
			out = append(out, x)
		}
	}
	return out
}

func (w *writer) stop() {
	w.cancel()
	<-w.done
}

// longestWait is the longest the writer waited for an acknowledgment: from
// the first write the store did not acknowledge (refused, or unobserved
// after a refusal) to the answer of the next one it acknowledged, or, with
// none refused, one acknowledged write's own time: the store's, as its
// client beside it in the pod measured it (put-timed), not the exec's path
// to it (under a CPU hog one write's exec took 5.1 s, the store 10 ms of
// it). Time the writer spent
// between writes (its samples, its pauses) is its own pace, not the
// store's: on a busy 2-core machine it made a gap between acknowledgments
// of over 5 s with no write refused. A refusal not followed by an
// acknowledgment runs to the stop; a writer that never got one waited
// from its start.
func (w *writer) longestWait(stopped time.Time) (time.Duration, time.Time) {
	if len(w.ackTimes) == 0 {
		return stopped.Sub(w.start), w.start
	}
	var longest time.Duration
	var at, since time.Time
	for _, a := range w.attempts {
		switch a.outcome {
		case refused:
			if since.IsZero() {
				since = a.start
			}
		case acked:
			from, d := since, a.end.Sub(since)
			if from.IsZero() {
				from, d = a.start, a.end.Sub(a.start)
				if a.storeTook > 0 {
					d = a.storeTook
				}
			}
			if d > longest {
				longest, at = d, from
			}
			since = time.Time{}
		}
	}
	if !since.IsZero() && stopped.Sub(since) > longest {
		longest, at = stopped.Sub(since), since
	}
	return longest, at
}

// stopWriter stops a writer and defines its acknowledged writes as a list
// of written records under its own name.
func (r *Run) stopWriter(name string) (*writer, error) {
	w, ok := r.writers[name]
	if !ok {
		return nil, fmt.Errorf("%s is not a running writer", name)
	}
	w.stop()
	delete(r.writers, name)
	w.mu.Lock()
	defer w.mu.Unlock()
	r.records[name] = append([]kv.Record(nil), w.acked...)
	return w, nil
}

// stepStopWriterKeeping stops a writer at once, with no checks, and keeps
// what it had acknowledged: the writes a copy must have on disk after a
// kill.
func stepStopWriterKeeping(_ context.Context, r *Run, a args) error {
	w, err := r.stopWriter(a["writer"])
	if err != nil {
		return err
	}
	r.defineWritten(a["as"], r.records[a["writer"]])
	r.t.Logf("writer: %d writes acknowledged, %d not (last error: %s)", len(w.acked), w.failed, w.lastErr)
	if len(w.acked) == 0 {
		return fmt.Errorf("the writer got no write acknowledged (%d failed; last: %s)", w.failed, w.lastErr)
	}
	return nil
}

// stepWriterAcked waits until a writer has n writes acknowledged.
func stepWriterAcked(ctx context.Context, r *Run, a args) error {
	w, ok := r.writers[a["writer"]]
	if !ok {
		return fmt.Errorf("%s is not a running writer", a["writer"])
	}
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	return harness.Until(ctx, fmt.Sprintf("%s to have %d writes acknowledged", a["writer"], n), deadline(ctx), func(context.Context) (bool, string, error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.acked) >= n, fmt.Sprintf("%d acknowledged, %d not (last error: %s)", len(w.acked), w.failed, w.lastErr), nil
	})
}

func stepStopWriter(ctx context.Context, r *Run, a args) error {
	w, err := r.stopWriter(a["writer"])
	if err != nil {
		return err
	}
	stopped := time.Now()
	atLeast, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	bound, err := time.ParseDuration(a["gap"])
	if err != nil {
		return err
	}
	gap, at := w.longestWait(stopped)
	r.t.Logf("writer: %d writes acknowledged, %d refused, %d unobserved (last error: %s); longest wait for an acknowledgment %s (from %s); "+
		"%d samples, at least %d copies serving at each; fewest: %s; %d reads could not be made",
		len(w.acked), w.failed, w.unobserved, w.lastErr, gap.Round(time.Millisecond), at.Format(time.TimeOnly), w.samples, w.minServing, w.worst, w.unreadable)
	switch {
	case len(w.acked) == 0:
		return fmt.Errorf("the writer got no write acknowledged (%d failed; last: %s)", w.failed, w.lastErr)
	case w.minServing < atLeast:
		return fmt.Errorf("%w: expected at least %d copies serving reads at every sample; seen %d: %s", harness.ErrNotSeen, atLeast, w.minServing, w.worst)
	case gap > bound:
		return fmt.Errorf("%w: expected no wait over %s for an acknowledged write; seen %s from %s (%d refused, %d unobserved; last error: %s)",
			harness.ErrNotSeen, bound, gap.Round(time.Millisecond), at.Format(time.TimeOnly), w.failed, w.unobserved, w.lastErr)
	}
	if err := r.everyPodHolds(ctx, w.acked); err != nil {
		return fmt.Errorf("acknowledged writes lost: %w", err)
	}
	return nil
}
