package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/e2e-framework/klient/k8s"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"liken.sh/per-node/e2e/internal/harness"
)

// storeLabel selects the guide's store pods.
const storeLabel = "app=store"

// copyLog is where a node keeps the store's records of the scenario's PV.
func copyLog(pv string) string {
	return "/var/lib/per-node.liken.sh/volumes/" + pv + "/data/records.jsonl"
}

var vocabulary = compile([]*stepDef{
	{Name: "apply {path}", Timeout: 30 * time.Second, run: stepApplyFile},
	{Name: "wait deployment {name} ready {n}", Timeout: 3 * time.Minute, run: stepDeploymentReady},
	{Name: "scale deployment {name} to {n}", Timeout: 30 * time.Second, run: stepScale},
	{Name: "pick a store pod", Timeout: time.Minute, Defines: true, run: stepPickStorePod},
	{Name: "pick a store pod other than {pod}", Timeout: time.Minute, Defines: true, run: stepPickOtherPod},
	{Name: "pick a pending store pod", Timeout: time.Minute, Defines: true, run: stepPickPendingPod},
	{Name: "pick the node of {pod}", Timeout: 30 * time.Second, Defines: true, run: stepNodeOf},
	{Name: "pick a worker without a store pod", Timeout: 30 * time.Second, Defines: true, run: stepFreeWorker},
	{Name: "pick the store pod on {node}", Timeout: 3 * time.Minute, Defines: true, run: stepStorePodOn},
	{Name: "cordon {node}", Timeout: 30 * time.Second, run: stepCordon(true)},
	{Name: "uncordon {node}", Timeout: 30 * time.Second, run: stepCordon(false)},
	{Name: "cordon every worker without a store pod", Timeout: 30 * time.Second, run: stepCordonFree},
	{Name: "delete pod {pod}", Timeout: time.Minute, run: stepDeletePod},
	{Name: "evict pod {pod}", Timeout: 2 * time.Minute, run: stepEvict},
	{Name: "evict pod {pod} is refused", Timeout: 15 * time.Second, run: stepEvictRefused},
	{Name: "drain {node}", Timeout: 3 * time.Minute, run: stepDrain},
	{Name: "store write {n} records", Timeout: 2 * time.Minute, Defines: true, run: stepWrite},
	{Name: "store write {n} records through {pod}", Timeout: 2 * time.Minute, Defines: true, run: stepWrite},
	{Name: "store write {n} records through every store pod", Timeout: 2 * time.Minute, Defines: true, run: stepWriteEach},
	{Name: "store pod {pod} holds {list}", Timeout: time.Minute, run: stepPodHolds},
	{Name: "every store pod holds {list}", Timeout: time.Minute, run: stepEveryPodHolds},
	{Name: "store pod {pod} found {cmp} {n} records on disk at start", Timeout: 30 * time.Second, run: stepFoundOnDisk},
	{Name: "every store pod found {cmp} {n} records on disk at start", Timeout: 30 * time.Second, run: stepEveryFoundOnDisk},
	{Name: "store pod {pod} fetched {cmp} {n} records", Timeout: 30 * time.Second, run: stepFetched},
	{Name: "store pods run on {n} distinct nodes", Timeout: time.Minute, run: stepDistinctNodes},
	{Name: "copy on {node} holds {list}", Timeout: time.Minute, run: stepCopyHolds},
	{Name: "the copy on every store pod's node holds {list}", Timeout: time.Minute, run: stepEveryCopyHolds},
	{Name: "copy on {node} is absent", Timeout: 30 * time.Second, run: stepCopyAbsent},
	{Name: "event {reason} on pod {pod}", Timeout: 2 * time.Minute, run: stepEvent},
	{Name: "event {reason} on pod {pod} names {holder}", Timeout: 2 * time.Minute, run: stepEvent},
	{Name: "pod {pod} stays pending for {duration}", Timeout: 2 * time.Minute, run: stepStaysPending},
	{Name: "no persistentvolume is bound to claim {name} for {duration}", Timeout: 2 * time.Minute, run: stepNoPVFor},
	{Name: "restart the driver on {node}", Timeout: 3 * time.Minute, run: stepRestartDriver},
	{Name: "restart node {node}", Timeout: 5 * time.Minute, run: stepRestartNode},
	{Name: "stop node {node}", Timeout: time.Minute, run: stepStopNode},
	{Name: "start node {node}", Timeout: 5 * time.Minute, run: stepStartNode},
	{Name: "delete node {node}", Timeout: time.Minute, run: stepDeleteNode},
	{Name: "no store pod is left", Timeout: 2 * time.Minute, run: stepNoStorePod},
	{Name: "persistentvolume {name} is gone", Timeout: 2 * time.Minute, run: stepPVGone},
	{Name: "start writing to the store", Timeout: 30 * time.Second, Defines: true, run: stepStartWriter},
	{Name: "stop {writer}: no acknowledged write lost, at least {n} store pods ready at every sample", Timeout: 2 * time.Minute, run: stepStopWriter},
	{Name: "restart kubelet on {node}", Timeout: 3 * time.Minute, run: stepRestartKubelet},
	{Name: "persistentvolume {name} records the node of every store pod", Timeout: time.Minute, run: stepPVRecordsEveryStorePodsNode},
	{Name: "persistentvolume {name} carries no per-node record for {duration}", Timeout: 2 * time.Minute, run: stepPVNoRecordFor},
	{Name: "no worker holds a copy", Timeout: time.Minute, run: stepNoWorkerHoldsACopy},
	{Name: "as the driver on {node}, changing the claimRef of persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverChangesClaimRef},
	{Name: "as the driver on {node}, adding the record of {other} to persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverAddsOthersRecord},
	{Name: "as the driver on {node}, removing the record of {other} from persistentvolume {name} is refused", Timeout: 30 * time.Second, run: stepDriverRemovesOthersRecord},
	{Name: "as the driver on {node}, adding its own record to persistentvolume {name} is allowed", Timeout: 30 * time.Second, run: stepDriverAddsOwnRecord},
})

func (r *Run) ns() string { return r.vars["ns"] }

func (r *Run) clientset() (*kubernetes.Clientset, error) {
	return kubernetes.NewForConfig(r.env.R.GetConfig())
}

// --- objects ----------------------------------------------------------------

func stepApplyFile(ctx context.Context, r *Run, a args) error {
	path := filepath.Join(r.env.Repo, a["path"])
	files := []string{path}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.yaml"))
		sort.Strings(files)
	}
	var objs []*unstructured.Unstructured
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(r.substitute(string(raw)))), 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				if err.Error() == "EOF" {
					break
				}
				return fmt.Errorf("%s: %w", f, err)
			}
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	return r.apply(ctx, objs)
}

// stepDeploymentReady waits until the Deployment and its pods agree: N
// replicas, N ready pods, and no pod still terminating (the Deployment's
// status lags an eviction by a moment; the pods do not).
func stepDeploymentReady(ctx context.Context, r *Run, a args) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	return harness.Until(ctx, fmt.Sprintf("deployment %s to have %d ready pods", a["name"], want), deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			var d appsv1.Deployment
			if err := r.env.R.Get(ctx, a["name"], r.ns(), &d); err != nil {
				return false, err.Error(), nil
			}
			pods, err := r.storePods(ctx)
			if err != nil {
				return false, "", err
			}
			ready, terminating := 0, 0
			for i := range pods {
				if pods[i].DeletionTimestamp != nil {
					terminating++
				} else if harness.PodReady(&pods[i]) {
					ready++
				}
			}
			st := d.Status
			seen := fmt.Sprintf("replicas %d, ready %d, available %d; pods: %s", st.Replicas, st.ReadyReplicas,
				st.AvailableReplicas, r.podsReport(ctx))
			done := st.ObservedGeneration >= d.Generation && st.AvailableReplicas == int32(want) &&
				st.Replicas == int32(want) && ready == want && terminating == 0 && len(pods) == want
			return done, seen, nil
		})
}

func stepScale(ctx context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: a["name"], Namespace: r.ns()}}
	patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, n)
	return r.env.R.Patch(ctx, d, k8s.Patch{PatchType: types.MergePatchType, Data: []byte(patch)})
}

// --- pods and nodes ---------------------------------------------------------

func (r *Run) storePods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.env.R.WithNamespace(r.ns()).List(ctx, &pods, resources.WithLabelSelector(storeLabel)); err != nil {
		return nil, err
	}
	sort.Slice(pods.Items, func(i, j int) bool { return pods.Items[i].Name < pods.Items[j].Name })
	return pods.Items, nil
}

func (r *Run) podsReport(ctx context.Context) string {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, p := range pods {
		state := fmt.Sprintf("%s ready=%v", p.Status.Phase, harness.PodReady(&p))
		if p.DeletionTimestamp != nil {
			state = "terminating"
		}
		s = append(s, fmt.Sprintf("%s on %q %s", p.Name, p.Spec.NodeName, state))
	}
	return strings.Join(s, "; ")
}

// pickPod waits for a store pod that satisfies ok and names it $as.
func (r *Run) pickPod(ctx context.Context, a args, what string, ok func(*corev1.Pod) bool) error {
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.storePods(ctx)
		if err != nil {
			return false, "", err
		}
		for i := range pods {
			if ok(&pods[i]) {
				r.vars[a["as"]] = pods[i].Name
				return true, "", nil
			}
		}
		return false, r.podsReport(ctx), nil
	})
}

func stepPickStorePod(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a ready store pod", harness.PodReady)
}

func stepPickOtherPod(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a ready store pod other than "+a["pod"], func(p *corev1.Pod) bool {
		return p.Name != a["pod"] && harness.PodReady(p)
	})
}

func stepPickPendingPod(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a pending store pod", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodPending && p.DeletionTimestamp == nil
	})
}

func stepStorePodOn(ctx context.Context, r *Run, a args) error {
	return r.pickPod(ctx, a, "a ready store pod on "+a["node"], func(p *corev1.Pod) bool {
		return p.Spec.NodeName == a["node"] && harness.PodReady(p)
	})
}

func stepNodeOf(ctx context.Context, r *Run, a args) error {
	var p corev1.Pod
	if err := r.env.R.Get(ctx, a["pod"], r.ns(), &p); err != nil {
		return err
	}
	if p.Spec.NodeName == "" {
		return fmt.Errorf("pod %s is not scheduled", a["pod"])
	}
	r.vars[a["as"]] = p.Spec.NodeName
	return nil
}

func (r *Run) workers(ctx context.Context) ([]corev1.Node, error) {
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return nil, err
	}
	var out []corev1.Node
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// freeWorkers are the workers that run no store pod.
func (r *Run) freeWorkers(ctx context.Context) ([]string, error) {
	ws, err := r.workers(ctx)
	if err != nil {
		return nil, err
	}
	pods, err := r.storePods(ctx)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	for _, p := range pods {
		used[p.Spec.NodeName] = true
	}
	var free []string
	for _, w := range ws {
		if !used[w.Name] {
			free = append(free, w.Name)
		}
	}
	return free, nil
}

func stepFreeWorker(ctx context.Context, r *Run, a args) error {
	free, err := r.freeWorkers(ctx)
	if err != nil {
		return err
	}
	if len(free) == 0 {
		return fmt.Errorf("every worker runs a store pod: %s", r.podsReport(ctx))
	}
	r.vars[a["as"]] = free[0]
	return nil
}

func stepCordon(unschedulable bool) func(context.Context, *Run, args) error {
	return func(ctx context.Context, r *Run, a args) error { return r.cordon(ctx, a["node"], unschedulable) }
}

func (r *Run) cordon(ctx context.Context, node string, unschedulable bool) error {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}
	patch := fmt.Sprintf(`{"spec":{"unschedulable":%v}}`, unschedulable)
	if err := r.env.R.Patch(ctx, n, k8s.Patch{PatchType: types.MergePatchType, Data: []byte(patch)}); err != nil {
		return fmt.Errorf("cordon %s: %w", node, err)
	}
	if unschedulable {
		r.lists["_cordoned"] = append(r.lists["_cordoned"], node)
	}
	return nil
}

func stepCordonFree(ctx context.Context, r *Run, _ args) error {
	free, err := r.freeWorkers(ctx)
	if err != nil {
		return err
	}
	for _, n := range free {
		if err := r.cordon(ctx, n, true); err != nil {
			return err
		}
	}
	return nil
}

func stepDeletePod(ctx context.Context, r *Run, a args) error {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: a["pod"], Namespace: r.ns()}}
	return r.env.R.Delete(ctx, p)
}

// evict asks for an eviction, as kubectl drain does.
func (r *Run) evict(ctx context.Context, pod string) error {
	cs, err := r.clientset()
	if err != nil {
		return err
	}
	return cs.PolicyV1().Evictions(r.ns()).Evict(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pod, Namespace: r.ns()},
	})
}

// evictUntilAllowed retries while the PodDisruptionBudget refuses.
func (r *Run) evictUntilAllowed(ctx context.Context, pod string) error {
	return harness.Until(ctx, "the eviction of "+pod+" to be allowed", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		err := r.evict(ctx, pod)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return true, "", nil
		case apierrors.IsTooManyRequests(err):
			return false, "refused: " + err.Error() + "; pods: " + r.podsReport(ctx), nil
		}
		return false, "", err
	})
}

func stepEvict(ctx context.Context, r *Run, a args) error { return r.evictUntilAllowed(ctx, a["pod"]) }

func stepEvictRefused(ctx context.Context, r *Run, a args) error {
	err := r.evict(ctx, a["pod"])
	if apierrors.IsTooManyRequests(err) {
		return nil
	}
	if err == nil {
		return fmt.Errorf("the eviction of %s was allowed; pods: %s", a["pod"], r.podsReport(ctx))
	}
	return fmt.Errorf("expected the PodDisruptionBudget to refuse the eviction of %s (429), got: %w", a["pod"], err)
}

func stepDrain(ctx context.Context, r *Run, a args) error {
	if err := r.cordon(ctx, a["node"], true); err != nil {
		return err
	}
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Spec.NodeName != a["node"] {
			continue
		}
		if err := r.evictUntilAllowed(ctx, p.Name); err != nil {
			return err
		}
		// Like kubectl drain: done when the evicted pod is gone.
		err := harness.Until(ctx, "evicted pod "+p.Name+" to be gone", deadline(ctx), func(ctx context.Context) (bool, string, error) {
			err := r.env.R.Get(ctx, p.Name, r.ns(), &corev1.Pod{})
			return apierrors.IsNotFound(err), r.podsReport(ctx), nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func stepDistinctNodes(ctx context.Context, r *Run, a args) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	return harness.Until(ctx, fmt.Sprintf("ready store pods on %d distinct nodes", want), deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.storePods(ctx)
		if err != nil {
			return false, "", err
		}
		nodes := map[string]bool{}
		for _, p := range pods {
			if harness.PodReady(&p) {
				nodes[p.Spec.NodeName] = true
			}
		}
		return len(nodes) == want && len(pods) == want, r.podsReport(ctx), nil
	})
}

func stepStaysPending(ctx context.Context, r *Run, a args) error {
	return holdsFor(ctx, a["duration"], func() error {
		var p corev1.Pod
		if err := r.env.R.Get(ctx, a["pod"], r.ns(), &p); err != nil {
			return err
		}
		if p.Status.Phase != corev1.PodPending {
			return fmt.Errorf("pod %s is %s, expected Pending for %s; events: %s", p.Name, p.Status.Phase, a["duration"], r.eventText(ctx, p.Name))
		}
		return nil
	})
}

// holdsFor checks every second, for the duration written in the step,
// that check keeps passing.
func holdsFor(ctx context.Context, duration string, check func() error) error {
	d, err := time.ParseDuration(duration)
	if err != nil {
		return err
	}
	for end := time.Now().Add(d); time.Now().Before(end); {
		if err := check(); err != nil {
			return err
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	return nil
}

func (r *Run) eventText(ctx context.Context, name string) string {
	events, err := r.events(ctx, r.ns(), name)
	if err != nil {
		return err.Error()
	}
	var s []string
	for _, e := range events {
		s = append(s, e.Reason+": "+e.Message)
	}
	return strings.Join(s, " | ")
}

func stepEvent(ctx context.Context, r *Run, a args) error {
	what := fmt.Sprintf("a %s event on pod %s", a["reason"], a["pod"])
	mention := ""
	if h := a["holder"]; h != "" {
		mention = r.ns() + "/" + h
		what += " naming " + mention
	}
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		events, err := r.events(ctx, r.ns(), a["pod"])
		if err != nil {
			return false, "", err
		}
		for _, e := range events {
			if e.Reason == a["reason"] && strings.Contains(e.Message, mention) {
				return true, "", nil
			}
		}
		return false, r.eventText(ctx, a["pod"]), nil
	})
}

func stepNoPVFor(ctx context.Context, r *Run, a args) error {
	return holdsFor(ctx, a["duration"], func() error {
		var pvs corev1.PersistentVolumeList
		if err := r.env.R.List(ctx, &pvs); err != nil {
			return err
		}
		for _, pv := range pvs.Items {
			if c := pv.Spec.ClaimRef; c != nil && c.Namespace == r.ns() && c.Name == a["name"] && pv.Status.Phase == corev1.VolumeBound {
				return fmt.Errorf("PersistentVolume %s is bound to claim %s/%s", pv.Name, r.ns(), a["name"])
			}
		}
		return nil
	})
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// deadline is what is left of a step's timeout.
func deadline(ctx context.Context) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		return time.Until(d)
	}
	return time.Minute
}

// --- the store --------------------------------------------------------------

// execStore runs the store's client in a pod and returns what it printed.
func (r *Run) execStore(ctx context.Context, pod string, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := append([]string{"/store", "client"}, args...)
	if err := r.env.R.ExecInPod(ctx, r.ns(), pod, "store", cmd, &stdout, &stderr); err != nil {
		return stdout.String(), fmt.Errorf("exec %v in %s: %w: %s", cmd, pod, err, stderr.String())
	}
	return stdout.String(), nil
}

type storeStatus struct {
	RecordsOnDiskAtStart int   `json:"recordsOnDiskAtStart"`
	Fetched              int64 `json:"fetched"`
	Records              int   `json:"records"`
	Ready                bool  `json:"ready"`
}

func (r *Run) storeStatus(ctx context.Context, pod string) (storeStatus, error) {
	out, err := r.execStore(ctx, pod, "status")
	if err != nil {
		return storeStatus{}, err
	}
	var st storeStatus
	return st, json.Unmarshal([]byte(out), &st)
}

func (r *Run) storeKeys(ctx context.Context, pod string) (map[string]bool, error) {
	out, err := r.execStore(ctx, pod, "dump")
	if err != nil {
		return nil, err
	}
	return keysOf([]byte(out))
}

func keysOf(dump []byte) (map[string]bool, error) {
	var recs []struct {
		Key string `json:"k"`
	}
	if err := json.Unmarshal(dump, &recs); err != nil {
		return nil, fmt.Errorf("parse records: %w", err)
	}
	keys := map[string]bool{}
	for _, rec := range recs {
		keys[rec.Key] = true
	}
	return keys, nil
}

func missing(want []string, have map[string]bool) []string {
	var m []string
	for _, k := range want {
		if !have[k] {
			m = append(m, k)
		}
	}
	return m
}

func stepWrite(ctx context.Context, r *Run, a args) error {
	pod := a["pod"]
	if pod == "" {
		if err := stepPickStorePod(ctx, r, args{"as": "_writer"}); err != nil {
			return err
		}
		pod = r.vars["_writer"]
	}
	prefix := a["as"] + "-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	out, err := r.execStore(ctx, pod, "put-many", prefix, a["n"])
	if err != nil {
		return err
	}
	keys := strings.Fields(out)
	if n, _ := strconv.Atoi(a["n"]); len(keys) != n {
		return fmt.Errorf("%d of %s writes were acknowledged by %s", len(keys), a["n"], pod)
	}
	r.lists[a["as"]] = keys
	r.vars[a["as"]] = fmt.Sprintf("%d records", len(keys))
	return nil
}

func stepWriteEach(ctx context.Context, r *Run, a args) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	var all []string
	for i, p := range pods {
		part := args{"n": a["n"], "pod": p.Name, "as": fmt.Sprintf("%s_%d", a["as"], i)}
		if err := stepWrite(ctx, r, part); err != nil {
			return err
		}
		all = append(all, r.lists[part["as"]]...)
		delete(r.lists, part["as"])
	}
	r.lists[a["as"]] = all
	r.vars[a["as"]] = fmt.Sprintf("%d records", len(all))
	return nil
}

func (r *Run) list(a args) ([]string, error) {
	name := strings.TrimPrefix(a["raw:list"], "$")
	if l, ok := r.lists[name]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("%s is not a list of written records", a["raw:list"])
}

func (r *Run) podHolds(ctx context.Context, pod string, want []string) error {
	return harness.Until(ctx, fmt.Sprintf("store pod %s to hold %d records", pod, len(want)), deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			keys, err := r.storeKeys(ctx, pod)
			if err != nil {
				return false, err.Error(), nil
			}
			m := missing(want, keys)
			return len(m) == 0, fmt.Sprintf("%d of %d missing (first: %v)", len(m), len(want), first(m, 5)), nil
		})
}

func first(s []string, n int) []string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

func stepPodHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.list(a)
	if err != nil {
		return err
	}
	return r.podHolds(ctx, a["pod"], want)
}

func stepEveryPodHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.list(a)
	if err != nil {
		return err
	}
	return r.everyPodHolds(ctx, want)
}

// everyPodHolds checks every store pod that is not terminating.
func (r *Run) everyPodHolds(ctx context.Context, want []string) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := r.podHolds(ctx, p.Name, want); err != nil {
			return err
		}
	}
	return nil
}

func compare(cmp string, got, want int) (bool, error) {
	switch cmp {
	case "=":
		return got == want, nil
	case ">":
		return got > want, nil
	}
	return false, fmt.Errorf("comparison %q: use = or >", cmp)
}

func stepFoundOnDisk(ctx context.Context, r *Run, a args) error {
	return r.checkStatus(ctx, a, func(st storeStatus) int { return st.RecordsOnDiskAtStart }, "records on disk at start")
}

func stepEveryFoundOnDisk(ctx context.Context, r *Run, a args) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		pa := args{"pod": p.Name, "cmp": a["cmp"], "n": a["n"]}
		if err := stepFoundOnDisk(ctx, r, pa); err != nil {
			return err
		}
	}
	return nil
}

func stepFetched(ctx context.Context, r *Run, a args) error {
	return r.checkStatus(ctx, a, func(st storeStatus) int { return int(st.Fetched) }, "records fetched from peers")
}

func (r *Run) checkStatus(ctx context.Context, a args, field func(storeStatus) int, what string) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	// The pod may not answer yet (a node just restarted): poll until it does.
	var st storeStatus
	err = harness.Until(ctx, "store pod "+a["pod"]+" to answer", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var err error
		st, err = r.storeStatus(ctx, a["pod"])
		if err != nil {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
	if err != nil {
		return err
	}
	ok, err := compare(a["cmp"], field(st), want)
	if err != nil || ok {
		return err
	}
	return fmt.Errorf("store pod %s: %s is %d, expected %s %d (status %+v)", a["pod"], what, field(st), a["cmp"], want, st)
}

// --- node copies ------------------------------------------------------------

// onNode runs a command in a kind node's container.
func (r *Run) onNode(ctx context.Context, node string, cmd ...string) (string, error) {
	return harness.Run(ctx, r.env.Repo, "docker", append([]string{"exec", node}, cmd...)...)
}

func stepCopyHolds(ctx context.Context, r *Run, a args) error {
	want, err := r.list(a)
	if err != nil {
		return err
	}
	return harness.Until(ctx, fmt.Sprintf("the copy on %s to hold %d records", a["node"], len(want)), deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			out, err := r.onNode(ctx, a["node"], "cat", copyLog(r.vars["pv"]))
			if err != nil {
				return false, err.Error(), nil
			}
			have := map[string]bool{}
			for _, line := range strings.Split(out, "\n") {
				var rec struct {
					Key string `json:"k"`
				}
				if json.Unmarshal([]byte(line), &rec) == nil {
					have[rec.Key] = true
				}
			}
			m := missing(want, have)
			return len(m) == 0, fmt.Sprintf("%d of %d missing on disk (first: %v)", len(m), len(want), first(m, 5)), nil
		})
}

func stepEveryCopyHolds(ctx context.Context, r *Run, a args) error {
	pods, err := r.storePods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if err := stepCopyHolds(ctx, r, args{"node": p.Spec.NodeName, "raw:list": a["raw:list"]}); err != nil {
			return err
		}
	}
	return nil
}

func stepCopyAbsent(ctx context.Context, r *Run, a args) error {
	dir := filepath.Dir(filepath.Dir(copyLog(r.vars["pv"])))
	return harness.Until(ctx, "the copy on "+a["node"]+" to be gone", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		out, err := r.onNode(ctx, a["node"], "sh", "-c", "ls -A "+dir+" 2>/dev/null || echo absent")
		if err != nil {
			return false, err.Error(), nil
		}
		if strings.TrimSpace(out) == "absent" {
			return true, "", nil
		}
		return false, fmt.Sprintf("%s holds %q", dir, strings.TrimSpace(out)), nil
	})
}

// driverPodsOn lists the driver's pods on node.
func (r *Run) driverPodsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := r.env.R.WithNamespace("per-node-system").List(ctx, &pods, resources.WithFieldSelector("spec.nodeName="+node))
	return pods.Items, err
}

func stepRestartDriver(ctx context.Context, r *Run, a args) error {
	var old corev1.Pod
	// A node that just registered again may still be replacing its pod.
	err := harness.Until(ctx, "one ready driver pod on "+a["node"], deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.driverPodsOn(ctx, a["node"])
		if err != nil {
			return false, "", err
		}
		if len(pods) == 1 && harness.PodReady(&pods[0]) {
			old = pods[0]
			return true, "", nil
		}
		return false, r.driverPodsReport(pods), nil
	})
	if err != nil {
		return err
	}
	if err := r.env.R.Delete(ctx, &old); err != nil {
		return err
	}
	return harness.Until(ctx, "a new ready driver pod on "+a["node"], deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.driverPodsOn(ctx, a["node"])
		if err != nil {
			return false, "", err
		}
		for _, p := range pods {
			if p.UID != old.UID && harness.PodReady(&p) {
				return true, "", nil
			}
		}
		return false, r.driverPodsReport(pods), nil
	})
}

// stepRestartNode restarts a node's kind container and waits until its new
// kubelet has renewed the node's lease and reports Ready.
func stepRestartNode(ctx context.Context, r *Run, a args) error {
	if _, err := harness.Run(ctx, r.env.Repo, "docker", "restart", "-t", "10", a["node"]); err != nil {
		return err
	}
	return r.waitKubelet(ctx, a["node"], time.Now())
}

// waitKubelet waits until node's kubelet, started after since, has renewed
// the node's lease and reports Ready.
func (r *Run) waitKubelet(ctx context.Context, node string, since time.Time) error {
	return harness.Until(ctx, "node "+node+"'s restarted kubelet to report Ready", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var lease coordinationv1.Lease
		if err := r.env.R.Get(ctx, node, "kube-node-lease", &lease); err != nil {
			return false, err.Error(), nil
		}
		renewed := lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(since)
		var n corev1.Node
		if err := r.env.R.Get(ctx, node, "", &n); err != nil {
			return false, err.Error(), nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return renewed && c.Status == corev1.ConditionTrue, fmt.Sprintf("lease renewed since restart: %v, Ready=%s", renewed, c.Status), nil
			}
		}
		return false, "no Ready condition", nil
	})
}

func stepStopNode(ctx context.Context, r *Run, a args) error {
	r.lists["_stopped"] = append(r.lists["_stopped"], a["node"])
	_, err := harness.Run(ctx, r.env.Repo, "docker", "stop", "-t", "10", a["node"])
	return err
}

func stepStartNode(ctx context.Context, r *Run, a args) error {
	since := time.Now()
	if _, err := harness.Run(ctx, r.env.Repo, "docker", "start", a["node"]); err != nil {
		return err
	}
	if err := r.waitKubelet(ctx, a["node"], since); err != nil {
		return err
	}
	// The driver's pod on the node (DaemonSet) must be back too.
	return harness.Until(ctx, "the driver to run on "+a["node"]+" again", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.driverPodsOn(ctx, a["node"])
		if err != nil {
			return false, "", err
		}
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				if harness.PodReady(&p) && cs.State.Running != nil && cs.State.Running.StartedAt.After(since) {
					return true, "", nil
				}
			}
		}
		return false, r.driverPodsReport(pods), nil
	})
}

func (r *Run) driverPodsReport(pods []corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, harness.PodReady(&p)))
	}
	return "driver pods: " + strings.Join(s, ", ")
}

func stepDeleteNode(ctx context.Context, r *Run, a args) error {
	return r.env.R.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a["node"]}})
}

func stepNoStorePod(ctx context.Context, r *Run, _ args) error {
	return harness.Until(ctx, "every store pod to be gone", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.storePods(ctx)
		if err != nil {
			return false, "", err
		}
		return len(pods) == 0, r.podsReport(ctx), nil
	})
}

func stepPVGone(ctx context.Context, r *Run, a args) error {
	start := time.Now()
	err := harness.Until(ctx, "PersistentVolume "+a["name"]+" to be gone", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var pv corev1.PersistentVolume
		err := r.env.R.Get(ctx, a["name"], "", &pv)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, err.Error(), nil
		}
		return false, fmt.Sprintf("phase %s, deleting %v, finalizers %v", pv.Status.Phase, pv.DeletionTimestamp != nil, pv.Finalizers), nil
	})
	if err == nil {
		r.t.Logf("PersistentVolume %s gone %s after the step began", a["name"], time.Since(start).Round(10*time.Millisecond))
	}
	return err
}

// --- cleanup ----------------------------------------------------------------

func (r *Run) createNamespace(ctx context.Context) error {
	return r.env.R.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns()}})
}

// cleanup undoes what the scenario did, pass or fail: writers stopped,
// nodes uncordoned, the namespace and PersistentVolumes deleted, and the
// copies they left on every node removed.
func (r *Run) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, w := range r.writers {
		w.stop()
	}
	for _, n := range r.lists["_stopped"] {
		if _, err := harness.Run(ctx, r.env.Repo, "docker", "start", n); err != nil {
			r.t.Logf("cleanup: starting node %s: %v", n, err)
		}
	}
	for _, n := range r.lists["_cordoned"] {
		_ = r.cordon(ctx, n, false)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns()}}
	_ = r.env.R.Delete(ctx, ns)
	_ = harness.Until(ctx, "namespace "+r.ns()+" to be gone", 2*time.Minute, func(ctx context.Context) (bool, string, error) {
		err := r.env.R.Get(ctx, r.ns(), "", &corev1.Namespace{})
		return apierrors.IsNotFound(err), "", nil
	})
	for _, pv := range r.lists["_pvs"] {
		_ = r.env.R.Delete(ctx, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv}})
		nodes, _ := r.workers(ctx)
		for _, n := range nodes {
			if _, err := r.onNode(ctx, n.Name, "rm", "-rf", "/var/lib/per-node.liken.sh/volumes/"+pv); err != nil {
				r.t.Logf("cleanup: removing the copy of %s on %s: %v", pv, n.Name, err)
			}
		}
	}
}
