package scenario

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"liken.sh/per-node/e2e/internal/harness"
)

// writer writes to the store while a scenario disrupts it, and samples how
// many store pods are ready.
type writer struct {
	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	acked    []string
	failed   int
	samples  int
	minReady int
}

func stepStartWriter(_ context.Context, r *Run, a args) error {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, done: make(chan struct{}), minReady: -1}
	r.writers[a["as"]] = w
	r.vars[a["as"]] = a["as"]
	go w.run(ctx, r, a["as"])
	return nil
}

func (w *writer) run(ctx context.Context, r *Run, name string) {
	defer close(w.done)
	for i := 0; ctx.Err() == nil; i++ {
		pods, err := r.storePods(ctx)
		ready := 0
		var target string
		for j := range pods {
			if harness.PodReady(&pods[j]) {
				ready++
				if target == "" || (i+j)%len(pods) == 0 {
					target = pods[j].Name
				}
			}
		}
		w.mu.Lock()
		if err == nil {
			w.samples++
			if w.minReady < 0 || ready < w.minReady {
				w.minReady = ready
			}
		}
		w.mu.Unlock()
		if target != "" {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			out, err := r.execStore(wctx, target, "put-many", name+"-"+strconv.Itoa(i), "1")
			cancel()
			w.mu.Lock()
			if err == nil && strings.TrimSpace(out) != "" {
				w.acked = append(w.acked, strings.TrimSpace(out))
			} else {
				w.failed++
			}
			w.mu.Unlock()
		}
		_ = sleep(ctx, 200*time.Millisecond)
	}
}

func (w *writer) stop() {
	w.cancel()
	<-w.done
}

func stepStopWriter(ctx context.Context, r *Run, a args) error {
	w, ok := r.writers[a["writer"]]
	if !ok {
		return fmt.Errorf("%s is not a writer", a["writer"])
	}
	w.stop()
	delete(r.writers, a["writer"])
	atLeast, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	r.t.Logf("writer: %d writes acknowledged, %d not acknowledged, %d samples, at least %d store pods ready at each",
		len(w.acked), w.failed, w.samples, w.minReady)
	if len(w.acked) == 0 {
		return fmt.Errorf("the writer got no write acknowledged (%d failed)", w.failed)
	}
	if w.minReady < atLeast {
		return fmt.Errorf("at one sample only %d store pods were ready, expected at least %d (%d samples)", w.minReady, atLeast, w.samples)
	}
	if err := r.everyPodHolds(ctx, w.acked); err != nil {
		return fmt.Errorf("acknowledged writes lost: %w", err)
	}
	return nil
}
