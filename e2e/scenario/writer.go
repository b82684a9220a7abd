package scenario

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"

	"liken.sh/per-node/fixtures/store/kv"
)

// writer writes to the store while a scenario disrupts it. It records the
// result and time of every write, and at every sample reads the last
// acknowledged key from every store pod that is not terminating: a copy
// serves when it answers that read with that value. Serving is measured
// by traffic, not by pod readiness.
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}
	start  time.Time

	mu         sync.Mutex
	acked      []kv.Record
	ackTimes   []time.Time
	failed     int
	lastErr    string
	samples    int
	minServing int
	worst      string // the sample with the fewest copies serving
}

func stepStartWriter(_ context.Context, r *Run, a args) error {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan struct{}), start: time.Now(), minServing: -1}
	r.writers[a["as"]] = w
	r.vars[a["as"]] = a["as"]
	go w.run(ctx, r, a["as"])
	return nil
}

func (w *writer) run(ctx context.Context, r *Run, name string) {
	defer close(w.done)
	for i := 0; ctx.Err() == nil; i++ {
		pods, err := r.storePods(ctx)
		if err != nil {
			continue
		}
		var live []corev1.Pod
		for _, p := range pods {
			if p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning {
				live = append(live, p)
			}
		}
		w.sample(ctx, r, live)
		if len(live) > 0 {
			w.write(ctx, r, live[i%len(live)].Name, name+"-"+strconv.Itoa(i))
		}
		_ = sleep(ctx, 100*time.Millisecond)
	}
}

func (w *writer) write(ctx context.Context, r *Run, pod, key string) {
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	recs, err := r.put(wctx, pod, key, 1)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err == nil && len(recs) == 1 {
		w.acked = append(w.acked, recs[0])
		w.ackTimes = append(w.ackTimes, time.Now())
		return
	}
	if ctx.Err() == nil {
		w.failed++
		w.lastErr = fmt.Sprint(err)
	}
}

// sample reads the last acknowledged key from every live pod at once.
func (w *writer) sample(ctx context.Context, r *Run, live []corev1.Pod) {
	w.mu.Lock()
	if len(w.acked) == 0 {
		w.mu.Unlock()
		return
	}
	last := w.acked[len(w.acked)-1]
	w.mu.Unlock()
	answers := make([]string, len(live))
	var wg sync.WaitGroup
	for j, p := range live {
		wg.Go(func() {
			rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			out, err := r.execStore(rctx, p.Name, "get", last.Key)
			switch {
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
	serving := 0
	for _, a := range answers {
		if a == "" {
			serving++
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.samples++
	if w.minServing < 0 || serving < w.minServing {
		w.minServing = serving
		w.worst = fmt.Sprintf("at %s, %d of %d live pods served %s (%s)", time.Now().Format(time.TimeOnly), serving, len(live),
			last.Key, strings.Join(nonEmpty(answers), "; "))
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

// longestGap is the longest time, from the writer's start to its stop,
// with no write acknowledged.
func (w *writer) longestGap(stopped time.Time) (time.Duration, time.Time) {
	prev, gap, at := w.start, time.Duration(0), w.start
	for _, t := range append(append([]time.Time{}, w.ackTimes...), stopped) {
		if d := t.Sub(prev); d > gap {
			gap, at = d, prev
		}
		prev = t
	}
	return gap, at
}

func stepStopWriter(ctx context.Context, r *Run, a args) error {
	w, ok := r.writers[a["writer"]]
	if !ok {
		return fmt.Errorf("%s is not a writer", a["writer"])
	}
	w.stop()
	stopped := time.Now()
	delete(r.writers, a["writer"])
	atLeast, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	bound, err := time.ParseDuration(a["gap"])
	if err != nil {
		return err
	}
	gap, at := w.longestGap(stopped)
	r.t.Logf("writer: %d writes acknowledged, %d not (last error: %s); longest time without an acknowledged write %s (from %s); "+
		"%d samples, at least %d copies serving at each; fewest: %s",
		len(w.acked), w.failed, w.lastErr, gap.Round(time.Millisecond), at.Format(time.TimeOnly), w.samples, w.minServing, w.worst)
	switch {
	case len(w.acked) == 0:
		return fmt.Errorf("the writer got no write acknowledged (%d failed; last: %s)", w.failed, w.lastErr)
	case w.minServing < atLeast:
		return fmt.Errorf("expected at least %d copies serving reads at every sample; seen %d: %s", atLeast, w.minServing, w.worst)
	case gap > bound:
		return fmt.Errorf("expected no time over %s without an acknowledged write; seen %s from %s (last error: %s)",
			bound, gap.Round(time.Millisecond), at.Format(time.TimeOnly), w.lastErr)
	}
	if err := r.everyPodHolds(ctx, w.acked); err != nil {
		return fmt.Errorf("acknowledged writes lost: %w", err)
	}
	return nil
}
