// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/client-go/util/exec"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/fixtures/store/kv"
)

// Steps about the guide's store: writes, what each copy holds in memory
// and on its node's disk, and when it turned ready. Agreement is checked
// on full contents — every record and every key's current value — never
// on a sample of keys.

// copyLog is where a node keeps the store's records of the scenario's PV.
func copyLog(pv string) string {
	return copiesRoot + "/volumes/" + pv + "/data/" + kv.LogName
}

// execStore runs the store's client in a pod and returns what it printed.
// Its error is marked harness.Unobserved unless the client ran and failed
// (the store answered, and not as asked): an exec that could not run or was
// cut short says nothing of the store.
func (r *Run) execStore(ctx context.Context, pod string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := append([]string{"/store", "client"}, args...)
	if err := r.env.R.ExecInPod(ctx, r.ns(), pod, "store", cmd, &stdout, &stderr); err != nil {
		err = fmt.Errorf("exec %v in %s: %w: %s", cmd, pod, err, strings.TrimSpace(stderr.String()))
		if !storeAnswered(ctx, err) {
			err = harness.Unobserved(err)
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}

// storeAnswered says whether an exec's error is the store's answer: its
// client ran and failed, or the pod has no running store container (kubelet
// says so: the copy is not served). Anything else (the exec's stream, the
// API server, a deadline) says nothing of the store.
func storeAnswered(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if _, ran := errors.AsType[utilexec.ExitError](err); ran {
		return true
	}
	return strings.Contains(err.Error(), "container not found")
}

// storeStatus is the store's /status.
type storeStatus struct {
	RecordsOnDiskAtStart int        `json:"recordsOnDiskAtStart"`
	TornBytesCut         int64      `json:"tornBytesCut"`
	Fetched              int64      `json:"fetched"`
	Received             int64      `json:"received"`
	Records              int        `json:"records"`
	Ready                bool       `json:"ready"`
	ReadyAt              *time.Time `json:"readyAt"`
	RecordsAtReady       int        `json:"recordsAtReady"`
}

func (r *Run) storeStatus(ctx context.Context, pod string) (storeStatus, error) {
	out, err := r.execStore(ctx, pod, "status")
	if err != nil {
		return storeStatus{}, err
	}
	var st storeStatus
	return st, json.Unmarshal([]byte(out), &st)
}

// answeringStatus polls until the pod's store answers (a node that just
// restarted may not yet).
func (r *Run) answeringStatus(ctx context.Context, pod string, ok func(storeStatus) bool, what string) (storeStatus, error) {
	var st storeStatus
	err := harness.Until(ctx, "store pod "+pod+" to "+what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var err error
		if st, err = r.storeStatus(ctx, pod); err != nil {
			return false, "", harness.Unobserved(err)
		}
		return ok(st), fmt.Sprintf("status %+v", st), nil
	})
	return st, err
}

// storeRecords is every record a pod's copy holds.
func (r *Run) storeRecords(ctx context.Context, pod string) ([]kv.Record, error) {
	out, err := r.execStore(ctx, pod, "dump")
	if err != nil {
		return nil, err
	}
	return kv.Read(strings.NewReader(out))
}

// diskRecords reads the log of the scenario's PV on a node's disk: its
// first `lines` lines, or all of it when lines < 0.
func (r *Run) diskRecords(ctx context.Context, node string, lines int) ([]kv.Record, error) {
	return r.diskRecordsOf(ctx, node, r.vars["pv"], lines)
}

func (r *Run) diskRecordsOf(ctx context.Context, node, pv string, lines int) ([]kv.Record, error) {
	// A log that is not there is a copy that holds nothing (removed, or
	// never written): an observation, not a read that failed.
	cmd := []string{"sh", "-c", `[ ! -e "$1" ] || exec cat "$1"`, "-", copyLog(pv)}
	if lines >= 0 {
		cmd = []string{"head", "-n", strconv.Itoa(lines), copyLog(pv)}
	}
	out, err := r.onNode(ctx, node, cmd...)
	if err != nil {
		return nil, err
	}
	recs, err := kv.Read(strings.NewReader(out))
	if err == nil && lines >= 0 && len(recs) != lines {
		err = fmt.Errorf("the log on %s has %d whole lines, expected at least %d", node, len(recs), lines)
	}
	return recs, err
}

// --- contents ---------------------------------------------------------------

// contents is what one copy holds: its records by ID, and each key's
// current record.
type contents struct {
	byID    map[string]kv.Record
	current map[string]kv.Record
}

func contentsOf(recs []kv.Record) contents {
	c := contents{byID: map[string]kv.Record{}, current: kv.Current(recs)}
	for _, rec := range recs {
		c.byID[rec.ID] = rec
	}
	return c
}

// lacks lists the written records a copy does not hold, or whose key it
// shows with an older value.
func (c contents) lacks(want []kv.Record) []string {
	var m []string
	for _, w := range want {
		got, ok := c.byID[w.ID]
		cur := c.current[w.Key]
		switch {
		case !ok:
			m = append(m, w.Key+" (absent)")
		case got != w:
			m = append(m, fmt.Sprintf("%s (held as %q, written %q)", w.Key, got.Value, w.Value))
		case cur.ID != w.ID && !cur.Supersedes(w):
			m = append(m, fmt.Sprintf("%s (current value %q from an older write)", w.Key, cur.Value))
		}
	}
	return m
}

// differ says how two copies differ: records one holds and the other not,
// and keys whose current values differ. Empty when they agree.
func differ(aName string, a contents, bName string, b contents) string {
	onlyA, onlyB := only(a.byID, b.byID), only(b.byID, a.byID)
	var keys []string
	for k, ra := range a.current {
		if rb, ok := b.current[k]; !ok || rb != ra {
			keys = append(keys, k)
		}
	}
	for k := range b.current {
		if _, ok := a.current[k]; !ok {
			keys = append(keys, k)
		}
	}
	if len(onlyA)+len(onlyB)+len(keys) == 0 {
		return ""
	}
	sort.Strings(keys)
	return fmt.Sprintf("%s holds %d records, %s %d; only in %s: %d %v; only in %s: %d %v; keys with different current values: %d %v",
		aName, len(a.byID), bName, len(b.byID), aName, len(onlyA), first(onlyA, 3), bName, len(onlyB), first(onlyB, 3), len(keys), first(keys, 3))
}

func only(a, b map[string]kv.Record) []string {
	var out []string
	for id := range a {
		if _, ok := b[id]; !ok {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return out
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// agree checks that every copy holds want and that all copies hold the
// same records with the same current values; it reports what differs.
func agree(named map[string]contents, want []kv.Record) (bool, string) {
	var names []string
	for n := range named {
		names = append(names, n)
	}
	sort.Strings(names)
	var problems []string
	for _, n := range names {
		if m := named[n].lacks(want); len(m) > 0 {
			problems = append(problems, fmt.Sprintf("%s lacks %d of %d written records (first: %v)", n, len(m), len(want), first(m, 3)))
		}
	}
	for _, n := range names[min(1, len(names)):] {
		if d := differ(names[0], named[names[0]], n, named[n]); d != "" {
			problems = append(problems, d)
		}
	}
	if len(problems) == 0 {
		return true, fmt.Sprintf("%d copies agree on %d records", len(names), len(named[names[0]].byID))
	}
	return false, strings.Join(problems, "; ")
}

// --- writing ----------------------------------------------------------------

// written returns a list of records the scenario wrote.
func (r *Run) written(a args) ([]kv.Record, error) {
	name := strings.TrimPrefix(a["raw:list"], "$")
	if l, ok := r.records[name]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("%s is not a list of written records", a["raw:list"])
}

func (r *Run) defineWritten(name string, recs []kv.Record) {
	r.records[name] = recs
	r.vars[name] = fmt.Sprintf("%d records", len(recs))
}

// put writes n records through pod and returns those acknowledged, and
// the error of the first write that was not.
func (r *Run) put(ctx context.Context, pod, prefix string, n int) ([]kv.Record, error) {
	out, err := r.execStore(ctx, pod, "put-many", prefix, strconv.Itoa(n))
	recs, perr := kv.Read(strings.NewReader(out))
	if err == nil {
		err = perr
	}
	return recs, err
}

func (r *Run) writePrefix(name string) string {
	return name + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
}

func stepWrite(ctx context.Context, r *Run, a args) error {
	pod := a["pod"]
	if pod == "" {
		if err := stepPickStorePod(ctx, r, args{"as": "_writer"}); err != nil {
			return err
		}
		pod = r.vars["_writer"]
	}
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	// A write the store refuses with 503 ("not acknowledged ... retry") is
	// not lost, it was never acknowledged: a client retries it, as here,
	// until the step's time runs out. Any other error ends the step.
	var recs []kv.Record
	refused := 0
	for attempt := 0; len(recs) < n; attempt++ {
		got, err := r.put(ctx, pod, r.writePrefix(a["as"])+"-"+strconv.Itoa(attempt), n-len(recs))
		recs = append(recs, got...)
		if err == nil && len(got) == 0 {
			return fmt.Errorf("%s answered a write of %d records with none", pod, n-len(recs))
		}
		if err == nil {
			continue
		}
		if !strings.Contains(err.Error(), "503 Service Unavailable") || sleep(ctx, 500*time.Millisecond) != nil {
			return fmt.Errorf("%d of %d writes were acknowledged by %s (%d refused with 503 and retried): %v", len(recs), n, pod, refused, err)
		}
		refused++
	}
	if refused > 0 {
		r.t.Logf("%s refused %d writes with 503 (retry) before acknowledging all %d", pod, refused, n)
	}
	r.defineWritten(a["as"], recs)
	return nil
}

// stepWriteBulk writes many records through one pod in bulk requests: a
// data set large enough that catching up takes a while.
func stepWriteBulk(ctx context.Context, r *Run, a args) error {
	if err := stepPickStorePod(ctx, r, args{"as": "_writer"}); err != nil {
		return err
	}
	pod := r.vars["_writer"]
	n, _ := strconv.Atoi(a["n"])
	for attempt := 1; ; attempt++ {
		out, err := r.execStore(ctx, pod, "put-bulk", r.writePrefix(a["as"]), a["n"])
		recs, cut, err := bulkOutcome(out, err, n)
		if err != nil {
			return fmt.Errorf("%d of %d bulk writes were acknowledged by %s: %w", len(recs), n, pod, err)
		}
		if !cut {
			r.defineWritten(a["as"], recs)
			return nil
		}
		if attempt == 3 {
			return fmt.Errorf("the exec stream from %s cut the list of acknowledged records 3 times (last: %d of %d)", pod, len(recs), n)
		}
		// The client exited 0, so the store acknowledged every record, but
		// the exec stream lost the tail of its output (kubernetes#124571):
		// the records this step would check are unknown. Write a fresh set;
		// the first stays in the store, and "holds" checks only this one.
		r.t.Logf("the exec stream from %s cut the acknowledged records after %d of %d; writing %d more under a new prefix", pod, len(recs), n, n)
	}
}

// bulkOutcome reads a put-bulk's output: the acknowledged records, and
// whether the output was cut in transit (the client exited 0, which it does
// only once every record was acknowledged, yet fewer than n arrived).
func bulkOutcome(out string, execErr error, n int) (recs []kv.Record, cut bool, err error) {
	recs, perr := kv.Read(strings.NewReader(out))
	switch {
	case execErr != nil:
		return recs, false, execErr
	case perr != nil:
		return recs, false, perr
	case len(recs) > n:
		return recs, false, fmt.Errorf("%d records acknowledged for %d written", len(recs), n)
	}
	return recs, len(recs) < n, nil
}

func stepWriteEach(ctx context.Context, r *Run, a args) error {
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return err
	}
	var all []kv.Record
	for i, p := range pods {
		part := args{"n": a["n"], "pod": p.Name, "as": fmt.Sprintf("%s_%d", a["as"], i)}
		if err := stepWrite(ctx, r, part); err != nil {
			return err
		}
		all = append(all, r.records[part["as"]]...)
		delete(r.records, part["as"])
	}
	r.defineWritten(a["as"], all)
	return nil
}

// stepWriteOnAnotherDisk writes one record at a time and, the moment each
// is acknowledged, reads every other store pod's node's disk once: an
// acknowledged write is already appended there. No polling: a store that
// acknowledges first and replicates later fails here.
func stepWriteOnAnotherDisk(ctx context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	others, err := r.otherStoreNodes(ctx, a["pod"])
	if err != nil {
		return err
	}
	prefix := r.writePrefix(a["as"])
	var all []kv.Record
	for i := range n {
		recs, err := r.put(ctx, a["pod"], fmt.Sprintf("%s-%d", prefix, i), 1)
		if err != nil || len(recs) != 1 {
			return fmt.Errorf("write %d through %s not acknowledged: %v", i, a["pod"], err)
		}
		var on []string
		for _, node := range others {
			disk, err := r.diskRecords(ctx, node, -1)
			if err != nil {
				return err
			}
			if len(contentsOf(disk).lacks(recs)) == 0 {
				on = append(on, node)
			}
		}
		if len(on) == 0 {
			return fmt.Errorf("%w: write %s was acknowledged by %s, and right then no other node's disk held it (checked %v): expected at least one",
				harness.ErrNotSeen, recs[0].Key, a["pod"], others)
		}
		all = append(all, recs...)
	}
	r.defineWritten(a["as"], all)
	return nil
}

// stepNotAckedAlone freezes (SIGSTOP) the store container of every other
// serving store pod, writes once through pod, and thaws them: with no
// other copy able to hold it, the write must not be acknowledged. A store
// that acknowledges first and replicates a moment later, or that takes
// one copy for enough, answers this write at once.
func stepNotAckedAlone(ctx context.Context, r *Run, a args) error {
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return err
	}
	var frozen []string
	defer func() {
		tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		for _, p := range frozen {
			if err := r.signalStore(tctx, p, "CONT"); err != nil {
				r.t.Logf("could not thaw the store container of %s: %v", p, err)
			}
		}
	}()
	for _, p := range pods {
		if p.Name == a["pod"] {
			continue
		}
		if err := r.signalStore(ctx, p.Name, "STOP"); err != nil {
			return err
		}
		frozen = append(frozen, p.Name)
	}
	if len(frozen) == 0 {
		return fmt.Errorf("no serving store pod other than %s to freeze: %s", a["pod"], r.podsReport(ctx))
	}
	key := r.writePrefix("alone")
	recs, err := r.put(ctx, a["pod"], key, 1)
	switch {
	case err == nil:
		return fmt.Errorf("%w: write %s through %s was acknowledged (%d records) while the store containers of %v were frozen: expected no acknowledgement",
			harness.ErrNotSeen, key, a["pod"], len(recs), frozen)
	case errors.Is(err, harness.ErrUnobserved):
		return err
	case !strings.Contains(err.Error(), "not acknowledged"):
		return fmt.Errorf("write %s through %s failed, but not as the store's refusal to acknowledge: %w", key, a["pod"], err)
	}
	r.t.Logf("with %v frozen, %s did not acknowledge write %s: %v", frozen, a["pod"], key, strings.SplitN(err.Error(), "\n", 2)[0])
	return nil
}

// otherStoreNodes are the nodes of the serving store pods other than pod.
func (r *Run) otherStoreNodes(ctx context.Context, pod string) ([]string, error) {
	pods, err := r.servingStorePods(ctx)
	if err != nil {
		return nil, err
	}
	var nodes []string
	for _, p := range pods {
		if p.Name != pod {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("no store pod other than %s: %s", pod, r.podsReport(ctx))
	}
	return nodes, nil
}

// servingStorePods are the store pods that are ready and not terminating.
func (r *Run) servingStorePods(ctx context.Context) ([]corev1.Pod, error) {
	pods, err := r.storePods(ctx)
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range pods {
		if p.DeletionTimestamp == nil && harness.PodReady(&p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// --- what copies hold -------------------------------------------------------

func stepPodHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	return r.podHolds(ctx, a["pod"], want)
}

func (r *Run) podHolds(ctx context.Context, pod string, want []kv.Record) error {
	return untilHolds(ctx, fmt.Sprintf("store pod %s to hold %d written records", pod, len(want)), want,
		func(ctx context.Context) ([]kv.Record, error) { return r.storeRecords(ctx, pod) })
}

// untilHolds polls read until the records it returns hold want.
func untilHolds(ctx context.Context, what string, want []kv.Record, read func(context.Context) ([]kv.Record, error)) error {
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		recs, err := read(ctx)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		m := contentsOf(recs).lacks(want)
		return len(m) == 0, fmt.Sprintf("%d of %d missing (first: %v)", len(m), len(want), first(m, 5)), nil
	})
}

func stepEveryPodHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	return r.everyPodHolds(ctx, want)
}

// everyPodHolds waits until every store pod that is not terminating holds
// want, and all of them hold the same records with the same values.
func (r *Run) everyPodHolds(ctx context.Context, want []kv.Record) error {
	return harness.Until(ctx, fmt.Sprintf("every store pod to hold the %d written records, and all to agree", len(want)), deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pods, err := r.storePods(ctx)
			if err != nil {
				return false, "", err
			}
			named := map[string]contents{}
			for _, p := range pods {
				if p.DeletionTimestamp != nil {
					continue
				}
				recs, err := r.storeRecords(ctx, p.Name)
				if err != nil {
					return false, "", harness.Unobserved(err)
				}
				named["pod "+p.Name] = contentsOf(recs)
			}
			if len(named) == 0 {
				return false, "no store pod: " + r.podsReport(ctx), nil
			}
			ok, report := agree(named, want)
			return ok, report, nil
		})
}

func stepCopyHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	return r.disksAgree(ctx, []string{a["node"]}, want)
}

func stepEveryCopyHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	var nodes []string
	for _, p := range pods {
		if p.DeletionTimestamp == nil && p.Spec.NodeName != "" {
			nodes = append(nodes, p.Spec.NodeName)
		}
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no store pod: %s", r.podsReport(ctx))
	}
	return r.disksAgree(ctx, nodes, want)
}

// stepCopyOfHolds reads another PV's copy on a node: it holds want, and
// its log reads whole.
func stepCopyOfHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	what := fmt.Sprintf("the copy of %s on %s to hold the %d written records", a["name"], a["node"], len(want))
	return untilHolds(ctx, what, want, func(ctx context.Context) ([]kv.Record, error) {
		return r.diskRecordsOf(ctx, a["node"], a["name"], -1)
	})
}

func stepEachCopyHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	nodes, err := r.nodeList(a)
	if err != nil {
		return err
	}
	return r.disksAgree(ctx, nodes, want)
}

// disksAgree waits until the copy on each node's disk holds want, and all
// of them hold the same records with the same values.
func (r *Run) disksAgree(ctx context.Context, nodes []string, want []kv.Record) error {
	what := fmt.Sprintf("the copies on %v to hold the %d written records on disk, and to agree", nodes, len(want))
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		named := map[string]contents{}
		for _, n := range nodes {
			recs, err := r.diskRecords(ctx, n, -1)
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			named["disk of "+n] = contentsOf(recs)
		}
		ok, report := agree(named, want)
		return ok, report, nil
	})
}

// --- at start and at ready --------------------------------------------------

func compare(cmp string, got, want int) (bool, error) {
	switch cmp {
	case "=":
		return got == want, nil
	case ">":
		return got > want, nil
	}
	return false, fmt.Errorf("comparison %q: use = or >", cmp)
}

func stepFoundCount(ctx context.Context, r *Run, a args) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	st, err := r.answeringStatus(ctx, a["pod"], func(storeStatus) bool { return true }, "answer")
	if err != nil {
		return err
	}
	return foundCount(a["pod"], st, a["cmp"], want)
}

// foundCount compares what a copy found on disk at start with the step's
// count: a count the store reports and the step does not expect is a
// broken promise (found 20 where a fresh copy must find 0).
func foundCount(pod string, st storeStatus, cmp string, want int) error {
	if ok, err := compare(cmp, st.RecordsOnDiskAtStart, want); err != nil || ok {
		return err
	}
	return fmt.Errorf("%w: store pod %s found %d records on disk at start, expected %s %d (status %+v)", harness.ErrNotSeen, pod, st.RecordsOnDiskAtStart, cmp, want, st)
}

func stepEveryFoundCount(ctx context.Context, r *Run, a args) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if err := stepFoundCount(ctx, r, args{"pod": p.Name, "cmp": a["cmp"], "n": a["n"]}); err != nil {
			return err
		}
	}
	return nil
}

// stepFoundOnDisk: the records the pod's copy opened with — the first
// recordsOnDiskAtStart lines of its node's log — include every written one.
func stepFoundOnDisk(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	st, err := r.answeringStatus(ctx, a["pod"], func(storeStatus) bool { return true }, "answer")
	if err != nil {
		return err
	}
	r.t.Logf("%s opened its log with %d records, %d bytes of torn tail cut", a["pod"], st.RecordsOnDiskAtStart, st.TornBytesCut)
	return r.heldInFirstLines(ctx, a["pod"], st.RecordsOnDiskAtStart, want, "on disk at start")
}

func stepEveryFoundOnDisk(ctx context.Context, r *Run, a args) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := stepFoundOnDisk(ctx, r, args{"pod": p.Name, "raw:list": a["raw:list"]}); err != nil {
			return err
		}
	}
	return nil
}

// stepHeldWhenReady: at the moment the pod's copy turned ready it held
// every written record — the first recordsAtReady lines of its log.
func stepHeldWhenReady(ctx context.Context, r *Run, a args) error {
	want, err := r.written(a)
	if err != nil {
		return err
	}
	st, err := r.answeringStatus(ctx, a["pod"], func(st storeStatus) bool { return st.ReadyAt != nil }, "turn ready")
	if err != nil {
		return err
	}
	if err := r.readyNoEarlierThan(ctx, a["pod"], *st.ReadyAt); err != nil {
		return err
	}
	return r.heldInFirstLines(ctx, a["pod"], st.RecordsAtReady, want, "when it turned ready at "+st.ReadyAt.Format(time.RFC3339Nano))
}

// readyNoEarlierThan waits for the pod's Ready condition (kubelet's, on the
// API server) and requires that it turned true no earlier than the store
// says its copy did: the store's own account of when it turned ready, and
// what it held then, is only the copy's content at the moment the pod
// turned Ready if the store did not stamp it later. The condition's time
// is cut to the second.
func (r *Run) readyNoEarlierThan(ctx context.Context, pod string, storeReady time.Time) error {
	var ready metav1.Time
	err := harness.Until(ctx, "pod "+pod+" to be Ready", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := r.env.R.Get(ctx, pod, r.ns(), &p); err != nil {
			return false, "", harness.Unobserved(err)
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready = c.LastTransitionTime
				return true, "", nil
			}
		}
		return false, "not Ready: " + r.podsReport(ctx), nil
	})
	if err != nil {
		return err
	}
	if storeReady.After(ready.Add(time.Second)) {
		return fmt.Errorf("%w: pod %s turned Ready at %s (its condition on the API server), but its store says its copy turned ready later, at %s",
			harness.ErrNotSeen, pod, ready.UTC().Format(time.RFC3339), storeReady.UTC().Format(time.RFC3339Nano))
	}
	return nil
}

func (r *Run) heldInFirstLines(ctx context.Context, pod string, lines int, want []kv.Record, when string) error {
	node, err := r.nodeOfPod(ctx, pod)
	if err != nil {
		return err
	}
	recs, err := r.diskRecords(ctx, node, lines)
	if err != nil {
		return err
	}
	if m := contentsOf(recs).lacks(want); len(m) > 0 {
		return fmt.Errorf("%w: store pod %s held %d records %s; %d of the %d written are not among them (first: %v)",
			harness.ErrNotSeen, pod, lines, when, len(m), len(want), first(m, 5))
	}
	return nil
}

func (r *Run) nodeOfPod(ctx context.Context, pod string) (string, error) {
	var p corev1.Pod
	if err := r.env.R.Get(ctx, pod, r.ns(), &p); err != nil {
		return "", err
	}
	if p.Spec.NodeName == "" {
		return "", fmt.Errorf("pod %s is not scheduled", pod)
	}
	return p.Spec.NodeName, nil
}

// --- node copies ------------------------------------------------------------

// onNode runs a command in a kind node's container.
func (r *Run) onNode(ctx context.Context, node string, cmd ...string) (string, error) {
	if r.exec != nil {
		return r.exec(ctx, node, cmd...)
	}
	return harness.Run(ctx, r.env.Repo, "docker", append([]string{"exec", node}, cmd...)...)
}

func stepCopyAbsent(ctx context.Context, r *Run, a args) error {
	return r.untilNoCopy(ctx, a["node"], r.vars["pv"], deadline(ctx))
}

// stepNoNodeHoldsCopy waits until no node of the cluster holds anything of
// the PV, trash included.
func stepNoNodeHoldsCopy(ctx context.Context, r *Run, a args) error {
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return harness.Unobserved(err)
	}
	for _, n := range nodes.Items {
		if err := r.untilNoCopy(ctx, n.Name, a["name"], deadline(ctx)); err != nil {
			return err
		}
	}
	return nil
}

// untilNoCopy waits until a node holds nothing of a PV, trash included.
func (r *Run) untilNoCopy(ctx context.Context, node, pv string, timeout time.Duration) error {
	what := fmt.Sprintf("node %s to hold nothing of %s, trash included", node, pv)
	return harness.Until(ctx, what, timeout, func(ctx context.Context) (bool, string, error) {
		left, err := r.copyLeft(ctx, node, pv)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		return left == "", left, nil
	})
}

// copyLeft lists what a node still holds of a PV's copy: its directory,
// and entries of it in the trash. Empty when nothing is left.
func (r *Run) copyLeft(ctx context.Context, node, pv string) (string, error) {
	script := fmt.Sprintf("cd %s && ls -d volumes/%s trash/%s.* 2>/dev/null || true", copiesRoot, pv, trashPrefix(pv))
	out, err := r.onNode(ctx, node, "sh", "-c", script)
	if err != nil {
		return "", err
	}
	if left := strings.Fields(out); len(left) > 0 {
		return fmt.Sprintf("%s holds %v under %s", node, left, copiesRoot), nil
	}
	return "", nil
}

// copiesRoot is the driver's root directory on every node.
const copiesRoot = "/var/lib/per-node.liken.sh"

// execStoreOnNode runs the store's client in a pod through its node's
// container runtime (crictl): no API server involved.
func (r *Run) execStoreOnNode(ctx context.Context, p corev1.Pod, args ...string) (string, error) {
	script := fmt.Sprintf(`id=$(crictl ps -q --name '^store$' --label io.kubernetes.pod.name=%s --label io.kubernetes.pod.namespace=%s)
[ -n "$id" ] || { echo "no running store container in pod %s" >&2; exit 3; }
exec crictl exec "$id" /store client "$@"`, p.Name, p.Namespace, p.Name)
	cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", p.Spec.NodeName, "sh", "-c", script, "sh"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		err = fmt.Errorf("store client %v in %s, through node %s: %w: %s", args, p.Name, p.Spec.NodeName, err,
			strings.TrimSpace(stderr.String()))
		// The client's own failure (1) or no store container (3) is the
		// store's answer; anything else is docker's or crictl's.
		if ee, ok := errors.AsType[*exec.ExitError](err); !ok || ctx.Err() != nil || (ee.ExitCode() != 1 && ee.ExitCode() != 3) {
			err = harness.Unobserved(err)
		}
		return stdout.String(), err
	}
	return stdout.String(), nil
}
