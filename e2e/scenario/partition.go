// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/fixtures/store/kv"
)

// Steps that make the store's copies differ or agree on purpose: a setting
// of the store, a network cut between its pods that leaves every other
// address reachable, and writes over keys already written.

// stepSetEnv sets one environment variable of a deployment's first
// container (a new pod template: the deployment rolls its pods).
func stepSetEnv(ctx context.Context, r *Run, a args) error {
	var d appsv1.Deployment
	if err := r.env.R.Get(ctx, a["name"], r.ns(), &d); err != nil {
		return err
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return fmt.Errorf("deployment %s has no container", a["name"])
	}
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"env":[{"name":%q,"value":%q}]}]}}}}`,
		d.Spec.Template.Spec.Containers[0].Name, a["key"], a["value"])
	return r.patchDeployment(ctx, a["name"], patch)
}

// stepCutStorePods drops, in each serving store pod's network namespace,
// every packet from the other store pods: replication, pulls and read
// repair between them all fail, while any other pod (a copy that starts
// later, the checks) still reaches each of them.
func stepCutStorePods(ctx context.Context, r *Run, _ args) error {
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return err
	}
	if len(pods) < 2 {
		return fmt.Errorf("%d serving store pods: nothing to cut apart (%s)", len(pods), r.podsReport(ctx))
	}
	for _, p := range pods {
		var rules []string
		for _, o := range pods {
			if o.Name != p.Name {
				rules = append(rules, fmt.Sprintf("nsenter -t $pid -n iptables -I INPUT -s %s -j DROP", o.Status.PodIP))
			}
		}
		script := strings.Join(rules, "\n") + "\necho \"pid $pid drops: $(nsenter -t $pid -n iptables -S INPUT | grep -c DROP) sources\""
		if err := r.inStoreProcess(ctx, p.Name, script); err != nil {
			return fmt.Errorf("cut store pod %s off from the others: %w", p.Name, err)
		}
	}
	return nil
}

// stepNoCopyHoldsAll reads the copy of every serving store pod on its node's
// disk, every second for the duration, and fails the moment one holds all
// of the list: the copies differ, and keep differing.
func stepNoCopyHoldsAll(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return err
	}
	rounds, failed := 0, error(nil)
	err = holdsFor(ctx, a["duration"], func() error {
		for _, p := range pods {
			recs, err := r.diskRecords(ctx, p.Spec.NodeName, -1)
			if err != nil {
				// A read that failed (a busy node) sees nothing; the next
				// second reads again.
				failed = err
				return nil
			}
			if len(contentsOf(recs).lacks(want)) == 0 {
				return fmt.Errorf("%w: the copy of store pod %s on %s holds all %d records of %s: the copies do not differ",
					harness.ErrNotSeen, p.Name, p.Spec.NodeName, len(want), a["raw:list"])
			}
		}
		rounds++
		return nil
	})
	if err == nil && rounds == 0 {
		return harness.Unobserved(fmt.Errorf("no read of every copy succeeded in %s: %w", a["duration"], failed))
	}
	return err
}

// stepOverwrite writes every key of the list again, through pod, with a new
// value: the record it defines is each key's latest write.
func stepOverwrite(ctx context.Context, r *Run, a args) error {
	old, err := r.written(a)
	if err != nil {
		return err
	}
	cmd := []string{"put-keys", r.writePrefix(a["as"]) + "="}
	for _, rec := range old {
		cmd = append(cmd, rec.Key)
	}
	out, err := r.execStore(ctx, a["pod"], cmd...)
	recs, perr := kv.Read(strings.NewReader(out))
	if err == nil {
		err = perr
	}
	if err != nil || len(recs) != len(old) {
		return fmt.Errorf("%d of %d overwrites were acknowledged by %s: %v", len(recs), len(old), a["pod"], err)
	}
	r.defineWritten(a["as"], recs)
	return nil
}

// stepEveryPodServes asks every serving store pod, from its own copy alone,
// for each key of the list: it must answer with the list's value (the
// store's answer, not the suite's reckoning from a dump).
func stepEveryPodServes(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	keys := []string{"get-local"}
	for _, w := range want {
		keys = append(keys, w.Key)
	}
	what := fmt.Sprintf("every store pod to serve the %d records of %s from its own copy", len(want), a["raw:list"])
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.servingStorePods(ctx)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		var wrong []string
		for _, p := range pods {
			out, err := r.execStore(ctx, p.Name, keys...)
			if errors.Is(err, harness.ErrUnobserved) {
				return false, "", err
			}
			got := strings.Split(out, "\n")
			for i, w := range want {
				if err != nil || i >= len(got) || got[i] != w.Value {
					wrong = append(wrong, fmt.Sprintf("%s: %s = %q, want %q (%v)", p.Name, w.Key, at(got, i), w.Value, err))
					break
				}
			}
		}
		return len(pods) > 0 && len(wrong) == 0, fmt.Sprintf("%d serving pods; %s", len(pods), strings.Join(wrong, "; ")), nil
	})
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}
