// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e && e2ebench

package e2e

import (
	"context"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/e2e/scenario"
)

// TestScale measures, for `make bench-e2e`, what the driver costs next to
// three baselines measured in the same run: a static local PersistentVolume
// with its claim (the peer: what a user would pick instead, through the same
// claim and volume path in the scheduler and kubelet, without CSI), a
// hostPath volume (the floor) and an emptyDir. Pod start, one at a time and
// ten at once; 200 volumes mounted on every worker; the deletion of 200
// per-node PVs; the driver's memory, CPU and API requests on each node, idle
// and under that load. It prints a table with every ratio against the local
// PV and against hostPath, and one line per goal, met or not. Last, the
// documents of e2e/bench: a rollout of a store of 500 MiB per copy, with and
// without the guide's preference for nodes that hold a copy.
func TestScale(t *testing.T) {
	f := features.New("scale").Assess("bench-e2e", func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
		r := client(t, c)
		cs, err := kubernetes.NewForConfig(unthrottled(r.GetConfig()))
		assert.NilError(t, err)
		b := &bench{t: t, r: r, cs: cs, ns: newNamespace(t, r), workers: workers(t, r), ready: map[string]*corev1.Pod{}, took: map[string]time.Duration{}}
		parts := benchParts(t)
		if parts["idle"] {
			b.idleCost(ctx)
		}
		if parts["podstart"] {
			b.podStart(ctx)
		}
		if parts["many"] {
			b.manyVolumes(ctx)
		}
		if parts["rollout"] {
			b.rollout(ctx, c)
		}
		b.print()
		return ctx
	}).Feature()
	testenv.Test(t, f)
}

// unthrottled is cfg without client-go's default client-side limit (5
// requests/s, bursts of 10): with it, pod creates sent 10 and 20 at once waited up to
// 1.8 s in this client before reaching the API server, and the wait counted
// as pod start. What is measured is the cluster, not the bench's client.
func unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 1000, 2000
	return cfg
}

// onNode runs a command in a kind node's container.
func onNode(ctx context.Context, node string, cmd ...string) (string, error) {
	return harness.Run(ctx, hcfg.Repo, "docker", append([]string{"exec", node}, cmd...)...)
}

// benchParts reads BENCH_PARTS (idle, podstart, many, rollout; comma-separated),
// every part when it is empty. The table has the rows of the parts run.
func benchParts(t *testing.T) map[string]bool {
	all := []string{"idle", "podstart", "many", "rollout"}
	env := os.Getenv("BENCH_PARTS")
	if env == "" {
		env = strings.Join(all, ",")
	}
	parts := map[string]bool{}
	for _, p := range strings.Split(env, ",") {
		if !slices.Contains(all, p) {
			t.Fatalf("BENCH_PARTS=%q: %q is not one of %v", env, p, all)
		}
		parts[p] = true
	}
	return parts
}

type bench struct {
	t       *testing.T
	r       *resources.Resources
	cs      kubernetes.Interface
	ns      string
	workers []string
	rows    []benchRow
	goals   []string
	batch   int
	ready   map[string]*corev1.Pod   // each pod as the watch first showed it Ready
	took    map[string]time.Duration // each pod's create call to the watch showing it Ready
}

// benchRow is a figure for per-node and each baseline (by kind), and the
// ratios of per-node's against the local PV's and hostPath's.
type benchRow struct {
	figure        string
	byKind        map[string]string
	vsLocal, vsHP string
}

// row is a figure of per-node's alone.
func (b *bench) row(figure, perNode string) {
	b.rows = append(b.rows, benchRow{figure: figure, byKind: map[string]string{"pn": perNode}})
}

// rowKinds is a figure for each kind, without ratios.
func (b *bench) rowKinds(figure string, byKind map[string]string) {
	b.rows = append(b.rows, benchRow{figure: figure, byKind: byKind})
}

// rowTimes is a duration for each kind, with per-node's ratios; it returns
// the ratio to the local PV, which the goals are set against.
func (b *bench) rowTimes(figure string, d map[string]time.Duration, round time.Duration) float64 {
	byKind := map[string]string{}
	for k, v := range d {
		byKind[k] = v.Round(round).String()
	}
	vsLocal, vsHP := d["pn"].Seconds()/d["lp"].Seconds(), d["pn"].Seconds()/d["hp"].Seconds()
	b.rows = append(b.rows, benchRow{figure, byKind, fmt.Sprintf("%.2f", vsLocal), fmt.Sprintf("%.2f", vsHP)})
	return vsLocal
}

// volumeKind is one way to give a pod a directory on its node: per-node,
// and the baselines it is measured against.
type volumeKind struct {
	short, name string
	plugin      string // kubelet's volume_plugin label
}

var kinds = []volumeKind{
	{"pn", "per-node", csiPlugin},
	{"lp", "local PV", localPlugin},
	{"hp", "hostPath", hostPathPlugin},
	{"ed", "emptyDir", emptyDirPlugin},
}

func (b *bench) goal(what string, met bool, seen string) {
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	b.goals = append(b.goals, fmt.Sprintf("goal %s: %s (%s)", what, verdict, seen))
}

func (b *bench) print() {
	fmt.Printf("bench-e2e: %d workers, kind on this machine\n", len(b.workers))
	fmt.Printf("bench-e2e: | figure | per-node | local PV | hostPath | emptyDir | per-node / local PV | per-node / hostPath |\n")
	fmt.Printf("bench-e2e: |---|---|---|---|---|---|---|\n")
	for _, r := range b.rows {
		fmt.Printf("bench-e2e: | %s | %s | %s | %s | %s | %s | %s |\n", r.figure,
			r.byKind["pn"], r.byKind["lp"], r.byKind["hp"], r.byKind["ed"], r.vsLocal, r.vsHP)
	}
	for _, g := range b.goals {
		fmt.Printf("bench-e2e: %s\n", g)
	}
}

// --- the driver's own figures, from each worker's /metrics -----------------

type driverSample struct {
	at                   time.Time
	rss, cpu, requests   float64 // bytes, seconds, count
	copies, beingRemoved float64
	publishes            map[string]float64 // NodePublishVolume calls by gRPC code
	publishSeconds       float64            // time the driver spent answering them
	heap, stacks, goHeld float64            // bytes: Go heap in use, stacks, held from the OS
	api                  map[string]float64 // API requests by "VERB code"
}

func (b *bench) sample(ctx context.Context, node string) (driverSample, error) {
	m, err := harness.DriverMetrics(ctx, b.cs, node)
	if err != nil {
		return driverSample{}, err
	}
	return driverSample{at: time.Now(), rss: m["process_resident_memory_bytes"], cpu: m["process_cpu_seconds_total"],
		requests: harness.SumOf(m, "per_node_api_requests_total"), copies: m["per_node_copies"],
		beingRemoved: m["per_node_copies_being_removed"], publishes: publishesByCode(m, "_count"),
		publishSeconds: sum(publishesByCode(m, "_sum")),
		heap:           m["go_memstats_heap_inuse_bytes"], stacks: m["go_memstats_stack_inuse_bytes"],
		goHeld: m["go_memstats_sys_bytes"] - m["go_memstats_heap_released_bytes"], api: apiByVerbAndCode(m)}, nil
}

// apiByVerbAndCode is the driver's API requests by "VERB code".
func apiByVerbAndCode(m map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		labels, ok := strings.CutPrefix(k, "per_node_api_requests_total{")
		if !ok {
			continue
		}
		_, code, _ := strings.Cut(labels, `code="`)
		code, _, _ = strings.Cut(code, `"`)
		_, verb, _ := strings.Cut(labels, `verb="`)
		verb, _, _ = strings.Cut(verb, `"`)
		out[verb+" "+code] += v
	}
	for _, series := range []struct{ metric, key string }{
		{"per_node_api_request_duration_seconds", "answer"}, {"per_node_api_client_wait_seconds", "wait"}} {
		for k, v := range m {
			labels, ok := strings.CutPrefix(k, series.metric+"_sum{")
			if !ok {
				continue
			}
			_, verb, _ := strings.Cut(labels, `verb="`)
			verb, _, _ = strings.Cut(verb, `"`)
			out[series.key+"_seconds "+verb] += v
			out[series.key+"_count "+verb] += m[series.metric+"_count{"+labels]
		}
	}
	return out
}

// apiRequests says what API requests every worker's driver made between
// two samples, by verb and code: a conflict (409) is a request done again.
func apiRequests(before, after map[string]driverSample) string {
	total := map[string]float64{}
	for n, a := range after {
		for k, v := range a.api {
			total[k] += v - before[n].api[k]
		}
	}
	var parts, times []string
	for _, k := range slices.Sorted(maps.Keys(total)) {
		kind, verb, _ := strings.Cut(k, " ")
		switch {
		case total[k] <= 0 || kind == "answer_count" || kind == "wait_count":
		case kind == "answer_seconds" || kind == "wait_seconds":
			what, _, _ := strings.Cut(kind, "_")
			times = append(times, fmt.Sprintf("%s %s mean %.1f ms", verb, what, 1000*total[k]/total[what+"_count "+verb]))
		default:
			parts = append(parts, fmt.Sprintf("%s %.0f", k, total[k]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ") + "; " + strings.Join(times, ", ")
}

// publishesByCode is the driver's NodePublishVolume histogram's series
// (_count: calls, _sum: seconds) by gRPC code.
func publishesByCode(m map[string]float64, series string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		rest, ok := strings.CutPrefix(k, `per_node_rpc_duration_seconds`+series+`{code="`)
		code, labels, _ := strings.Cut(rest, `"`)
		if ok && strings.Contains(labels, `method="NodePublishVolume"`) {
			out[code] += v
		}
	}
	return out
}

// publishes says how many NodePublishVolume calls every worker's driver
// answered between two samples, by code: a code other than OK makes kubelet
// back off before it asks again, which a pod's start time shows.
func publishes(before, after map[string]driverSample) string {
	total := map[string]float64{}
	for n, a := range after {
		for code, v := range a.publishes {
			total[code] += v - before[n].publishes[code]
		}
	}
	var parts []string
	for _, code := range slices.Sorted(maps.Keys(total)) {
		if total[code] > 0 {
			parts = append(parts, fmt.Sprintf("%s %.0f", code, total[code]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	var n, took float64
	for node, a := range after {
		n += sum(a.publishes) - sum(before[node].publishes)
		took += a.publishSeconds - before[node].publishSeconds
	}
	return fmt.Sprintf("%s; the driver's mean answer %.1f ms", strings.Join(parts, ", "), 1000*took/n)
}

func sum(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

func (b *bench) sampleAll(ctx context.Context) map[string]driverSample {
	out := map[string]driverSample{}
	for _, n := range b.workers {
		s, err := b.sample(ctx, n)
		assert.NilError(b.t, err)
		out[n] = s
	}
	return out
}

// rates are the per-node averages between two samples of every worker.
func rates(before, after map[string]driverSample) (cpuPerMin, reqPerMin, maxRSS float64) {
	for n, a := range after {
		s := before[n]
		minutes := a.at.Sub(s.at).Minutes()
		cpuPerMin += (a.cpu - s.cpu) / minutes
		reqPerMin += (a.requests - s.requests) / minutes
		maxRSS = math.Max(maxRSS, a.rss)
	}
	k := float64(len(after))
	return cpuPerMin / k, reqPerMin / k, maxRSS
}

const mib = 1 << 20

// memory says what the largest driver's resident memory is made of: the Go
// heap in use, goroutine stacks, and all the Go runtime holds from the OS;
// the rest of the RSS is the binary's pages and shared libraries' (none).
func memory(samples map[string]driverSample) string {
	var top driverSample
	for _, s := range samples {
		if s.rss > top.rss {
			top = s
		}
	}
	return fmt.Sprintf("%.1f MiB (Go heap in use %.1f, stacks %.1f, held by the Go runtime %.1f)",
		top.rss/mib, top.heap/mib, top.stacks/mib, top.goHeld/mib)
}

func (b *bench) idleCost(ctx context.Context) {
	before := b.sampleAll(ctx)
	time.Sleep(time.Minute) // the measurement window: nothing happens on purpose
	after := b.sampleAll(ctx)
	cpu, req, _ := rates(before, after)
	_, _, rss := rates(before, after)
	b.row("driver idle: CPU s/min, API requests/min, RSS (max of nodes)",
		fmt.Sprintf("%.3f s, %.2f, %s", cpu, req, memory(after)))
	b.goal("idle CPU ~0 (<= 0.1 s/min per node)", cpu <= 0.1, fmt.Sprintf("%.3f s/min", cpu))
	b.goal("driver RSS idle <= 30 MiB", rss <= 30*mib, fmt.Sprintf("%.1f MiB", rss/mib))
}

// --- pods ------------------------------------------------------------------

// pod is a probe pod on node with the given volumes.
func (b *bench) pod(name, node string, vols []corev1.Volume) *corev1.Pod {
	p := probePod(b.ns, name, node)
	p.Spec.Volumes = vols
	p.Spec.Containers[0].VolumeMounts = nil
	for _, v := range vols {
		p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts,
			corev1.VolumeMount{Name: v.Name, MountPath: "/data/" + v.Name})
	}
	return p
}

func claimVolume(name, claim string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func hostPathVolume(name, path string) corev1.Volume {
	t := corev1.HostPathDirectoryOrCreate
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
		HostPath: &corev1.HostPathVolumeSource{Path: path, Type: &t}}}
}

// start creates pods at once and returns, for each, the time from its
// create call to the watch showing it Ready.
func (b *bench) start(ctx context.Context, pods []*corev1.Pod) []time.Duration {
	b.t.Helper()
	b.batch++
	batch := b.batch
	for _, p := range pods {
		p.Labels["bench-batch"] = fmt.Sprint(batch)
	}
	w, err := b.cs.CoreV1().Pods(b.ns).Watch(ctx, metav1.ListOptions{LabelSelector: fmt.Sprintf("bench-batch=%d", batch)})
	assert.NilError(b.t, err)
	defer w.Stop()
	var mu sync.Mutex
	created := map[string]time.Time{}
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			at := time.Now()
			if _, err := b.cs.CoreV1().Pods(b.ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
				errs <- err
				return
			}
			mu.Lock()
			created[p.Name] = at
			mu.Unlock()
		}()
	}
	ready := map[string]time.Time{}
	timeout := time.After(10 * time.Minute)
	for len(ready) < len(pods) {
		select {
		case err := <-errs:
			b.t.Fatalf("create a pod: %v", err)
		case ev, ok := <-w.ResultChan():
			if !ok {
				b.t.Fatalf("the watch of batch %d ended with %d of %d pods ready", batch, len(ready), len(pods))
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if ev.Type == watch.Error || !isPod {
				continue
			}
			if _, seen := ready[p.Name]; !seen && harness.PodReady(p) {
				ready[p.Name] = time.Now()
				b.ready[p.Name] = p
			}
		case <-timeout:
			b.t.Fatalf("batch %d: %d of %d pods ready after 10m", batch, len(ready), len(pods))
		}
	}
	wg.Wait()
	out := make([]time.Duration, 0, len(pods))
	for _, p := range pods {
		d := ready[p.Name].Sub(created[p.Name])
		b.took[p.Name] = d
		out = append(out, d)
	}
	return out
}

// deletePods deletes every pod of the namespace and waits until they are gone.
func (b *bench) deletePods(ctx context.Context) {
	b.t.Helper()
	grace := int64(0)
	assert.NilError(b.t, b.cs.CoreV1().Pods(b.ns).DeleteCollection(ctx,
		metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{}))
	poll.WaitOn(b.t, func(poll.LogT) poll.Result {
		pods, err := b.cs.CoreV1().Pods(b.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return poll.Continue("list pods: %v", err)
		}
		if len(pods.Items) > 0 {
			return poll.Continue("%d pods left", len(pods.Items))
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Minute), poll.WithDelay(time.Second))
	// A pod deleted without grace leaves the API at once, while kubelet and
	// containerd go on stopping and removing its containers: the next pods
	// measured would pay for that (10 at once beside the teardown of 80
	// pods took 6.5 s in RunPodSandbox against 0.8 s without).
	poll.WaitOn(b.t, func(poll.LogT) poll.Result {
		var left []string
		for _, n := range b.workers {
			out, err := onNode(ctx, n, "crictl", "pods", "--namespace", b.ns, "-q")
			if err != nil {
				return poll.Continue("crictl pods on %s: %v", n, err)
			}
			if k := len(strings.Fields(out)); k > 0 {
				left = append(left, fmt.Sprintf("%s %d", n, k))
			}
		}
		if len(left) > 0 {
			return poll.Continue("pod sandboxes of %s still in the container runtime: %s", b.ns, strings.Join(left, ", "))
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Minute), poll.WithDelay(2*time.Second))
}

// volumes creates n per-node PVs and claims named prefix-i and waits until
// every claim is bound.
func (b *bench) volumes(ctx context.Context, prefix string, n int) []string {
	b.t.Helper()
	var claims []string
	for i := range n {
		claim := fmt.Sprintf("%s-%03d", prefix, i)
		vol, pvc := perNodeObjects(b.ns, b.ns+"-"+claim, claim)
		_, err := b.cs.CoreV1().PersistentVolumes().Create(ctx, vol, metav1.CreateOptions{})
		assert.NilError(b.t, err)
		b.t.Cleanup(func() { // nothing left once deleteVolumes passed
			_ = b.cs.CoreV1().PersistentVolumes().Delete(context.Background(), vol.Name, metav1.DeleteOptions{})
		})
		_, err = b.cs.CoreV1().PersistentVolumeClaims(b.ns).Create(ctx, pvc, metav1.CreateOptions{})
		assert.NilError(b.t, err)
		claims = append(claims, claim)
	}
	b.waitBound(ctx, prefix, n)
	return claims
}

// waitBound waits until n claims prefix-* are bound.
func (b *bench) waitBound(ctx context.Context, prefix string, n int) {
	b.t.Helper()
	poll.WaitOn(b.t, func(poll.LogT) poll.Result {
		list, err := b.cs.CoreV1().PersistentVolumeClaims(b.ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return poll.Continue("list claims: %v", err)
		}
		bound := 0
		for _, c := range list.Items {
			if strings.HasPrefix(c.Name, prefix+"-") && c.Status.Phase == corev1.ClaimBound {
				bound++
			}
		}
		if bound < n {
			return poll.Continue("%d of %d claims %s-* bound", bound, n, prefix)
		}
		return poll.Success()
	}, poll.WithTimeout(5*time.Minute), poll.WithDelay(time.Second))
}

// --- pod start -------------------------------------------------------------

const podStartEach = 20

// podVolume gives a pod of kind its i-th volume on node.
type podVolume func(kind string, i int) corev1.Volume

// startVolumes makes n volumes of each kind on node (per-node and local
// PVs with claims prefix-pn-i, prefix-lp-i; hostPath directories; emptyDir)
// and returns how to give one to a pod.
func (b *bench) startVolumes(ctx context.Context, prefix, node string, n int) (podVolume, func()) {
	pn := b.volumes(ctx, prefix+"-pn", n)
	lp := b.localVolumes(ctx, prefix+"-lp", map[string]int{node: n})[node]
	hostDir := "/var/tmp/per-node-bench/" + b.ns
	vol := func(kind string, i int) corev1.Volume {
		switch kind {
		case "pn":
			return claimVolume("data", pn[i])
		case "lp":
			return claimVolume("data", lp[i])
		case "hp":
			return hostPathVolume("data", fmt.Sprintf("%s/%s-%d", hostDir, prefix, i))
		}
		return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	return vol, func() {
		_, _ = b.deleteVolumes(ctx, prefix+"-pn", pn)
		b.deleteLocalVolumes(ctx, lp)
	}
}

func (b *bench) podStart(ctx context.Context) {
	node := b.workers[0]
	vol, cleanup := b.startVolumes(ctx, "ps", node, 2*podStartEach)
	seq, par := map[string][]time.Duration{}, map[string][]time.Duration{}
	before := b.sampleAll(ctx)
	kubeletBefore, err := harness.KubeletMetrics(ctx, b.cs, node)
	assert.NilError(b.t, err)
	for i := range podStartEach { // one of each kind, in turn
		for _, k := range kinds {
			seq[k.short] = append(seq[k.short], b.start(ctx, []*corev1.Pod{
				b.pod(fmt.Sprintf("seq-%s-%d", k.short, i), node, []corev1.Volume{vol(k.short, i)})})...)
		}
	}
	b.deletePods(ctx)
	for round := range podStartEach / 10 { // ten of a kind at once, kinds in turn
		for _, k := range kinds {
			var pods []*corev1.Pod
			for i := range 10 {
				j := round*10 + i
				pods = append(pods, b.pod(fmt.Sprintf("par-%s-%d", k.short, j), node, []corev1.Volume{vol(k.short, podStartEach+j)}))
			}
			par[k.short] = append(par[k.short], b.start(ctx, pods)...)
		}
	}
	afterStart := b.sampleAll(ctx)
	b.row("NodePublishVolume answers during pod start, by code", publishes(before, afterStart))
	b.row("the drivers' API requests during pod start, by verb and code", apiRequests(before, afterStart))
	kubeletAfter, err := harness.KubeletMetrics(ctx, b.cs, node)
	assert.NilError(b.t, err)
	b.rowKinds("kubelet's volume operations during pod start, by operation", b.byKind(func(k volumeKind) string {
		return harness.VolumeOps(kubeletBefore, kubeletAfter, k.plugin)
	}))
	b.row("kubelet's calls to the driver during pod start (its csi_operations_seconds)",
		harness.CSICalls(kubeletBefore, kubeletAfter, harness.DriverName))
	b.rowKinds("Warning events on the pods, by reason", b.byKind(func(k volumeKind) string {
		return b.podWarnings(ctx, "-"+k.short+"-")
	}))
	for _, mode := range []string{"seq", "par"} {
		b.rowKinds(fmt.Sprintf("pod start %s, median of each phase (pod conditions, 1 s steps)", mode),
			b.byKind(func(k volumeKind) string { return b.phases(mode + "-" + k.short + "-") }))
	}
	b.rowKinds("pod start 10 at once, the 2 slowest pods: each phase and the pod's events", b.byKind(func(k volumeKind) string {
		return b.slowest(ctx, "par-"+k.short+"-", 2)
	}))
	b.deletePods(ctx)
	cleanup()
	for _, c := range []struct {
		name string
		d    map[string][]time.Duration
	}{{"sequential", seq}, {"10 at once", par}} {
		for _, q := range []struct {
			name  string
			p     float64
			limit float64
		}{{"median", 0.5, 1.05}, {"p95", 0.95, 1.15}} {
			at := map[string]time.Duration{}
			for k, d := range c.d {
				at[k] = quantile(d, q.p)
			}
			vsLocal := b.rowTimes(fmt.Sprintf("pod start %s, %s (%d of each kind, one node)", c.name, q.name, len(c.d["pn"])),
				at, time.Millisecond)
			b.goal(fmt.Sprintf("pod start %s %s, per-node / local PV <= %.2f", c.name, q.name, q.limit),
				vsLocal <= q.limit, fmt.Sprintf("%.2f", vsLocal))
		}
	}
}

// byKind is f of every kind, by its short name.
func (b *bench) byKind(f func(volumeKind) string) map[string]string {
	out := map[string]string{}
	for _, k := range kinds {
		out[k.short] = f(k)
	}
	return out
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// --- where a pod's start goes ----------------------------------------------

// The volume_plugin label of kubelet's storage_operation_duration_seconds.
const (
	csiPlugin      = "kubernetes.io/csi:" + harness.DriverName
	localPlugin    = "kubernetes.io/local-volume"
	hostPathPlugin = "kubernetes.io/host-path"
	emptyDirPlugin = "kubernetes.io/empty-dir"
)

// podWarnings counts the Warning events on the namespace's pods whose names
// contain part, by reason, with one message of each reason.
func (b *bench) podWarnings(ctx context.Context, part string) string {
	evs, err := b.cs.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{FieldSelector: "type=Warning,involvedObject.kind=Pod"})
	assert.NilError(b.t, err)
	count, example := map[string]int32{}, map[string]string{}
	for _, e := range evs.Items {
		if !strings.Contains(e.InvolvedObject.Name, part) {
			continue
		}
		count[e.Reason] += max(e.Count, 1)
		example[e.Reason] = e.Message
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(count)) {
		parts = append(parts, fmt.Sprintf("%s %d (%q)", r, count[r], example[r]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "; ")
}

// phases gives the median time, over the pods whose names start with
// prefix, from the pod's creation to its scheduling, from there to its
// sandbox being ready (kubelet mounts the volumes before it creates the
// sandbox), and from there to Ready. Conditions carry whole seconds.
func (b *bench) phases(prefix string) string {
	var sched, sandbox, ready []time.Duration
	for name, p := range b.ready {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		at := map[corev1.PodConditionType]time.Time{}
		for _, c := range p.Status.Conditions {
			at[c.Type] = c.LastTransitionTime.Time
		}
		created := p.CreationTimestamp.Time
		sched = append(sched, at[corev1.PodScheduled].Sub(created))
		sandbox = append(sandbox, at[corev1.PodReadyToStartContainers].Sub(at[corev1.PodScheduled]))
		ready = append(ready, at[corev1.PodReady].Sub(at[corev1.PodReadyToStartContainers]))
	}
	if len(sched) == 0 {
		return "none"
	}
	return fmt.Sprintf("scheduled %s, volumes and sandbox %s, containers Ready %s",
		quantile(sched, 0.5), quantile(sandbox, 0.5), quantile(ready, 0.5))
}

// slowest describes the n slowest pods whose names start with prefix: how
// long each took, its phases (pod conditions, whole seconds) and the
// reasons of its events.
func (b *bench) slowest(ctx context.Context, prefix string, n int) string {
	var names []string
	for name := range b.took {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.SortFunc(names, func(x, y string) int { return int(b.took[y] - b.took[x]) })
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		p := b.ready[name]
		at := map[corev1.PodConditionType]time.Time{}
		for _, c := range p.Status.Conditions {
			at[c.Type] = c.LastTransitionTime.Time
		}
		evs, err := b.cs.CoreV1().Events(b.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
		assert.NilError(b.t, err)
		var reasons []string
		for _, e := range evs.Items {
			reasons = append(reasons, fmt.Sprintf("%s %s", e.LastTimestamp.Sub(p.CreationTimestamp.Time), e.Reason))
		}
		parts = append(parts, fmt.Sprintf("%s %s (scheduled +%s, volumes and sandbox +%s, Ready +%s; events: %s; kubelet: %s)",
			name, b.took[name].Round(time.Millisecond), at[corev1.PodScheduled].Sub(p.CreationTimestamp.Time),
			at[corev1.PodReadyToStartContainers].Sub(at[corev1.PodScheduled]), at[corev1.PodReady].Sub(at[corev1.PodReadyToStartContainers]),
			strings.Join(reasons, ", "), b.kubeletGap(ctx, p, at[corev1.PodReady])))
	}
	return strings.Join(parts, "; ")
}

// kubeletLog is where the bench keeps kubelet's lines about the slowest
// pods (the table gives each one's longest quiet stretch).
const kubeletLog = "_out/bench-e2e-kubelet.log"

// kubeletGap is the longest stretch in which kubelet logged nothing about
// pod p, from its creation to ready (a second either side: conditions carry
// whole seconds): how long, and kubelet's lines either side. Every line
// about p goes to kubeletLog.
func (b *bench) kubeletGap(ctx context.Context, p *corev1.Pod, ready time.Time) string {
	const stamp = "2006-01-02 15:04:05"
	out, err := onNode(ctx, p.Spec.NodeName, "journalctl", "-u", "kubelet",
		"-o", "short-iso-precise", "--no-pager", "--utc",
		"--since", p.CreationTimestamp.Add(-time.Second).UTC().Format(stamp), "--until", ready.Add(2*time.Second).UTC().Format(stamp))
	if err != nil {
		return "journal unreadable: " + err.Error()
	}
	type line struct {
		at   time.Time
		text string
	}
	var mine []line
	for l := range strings.Lines(out) {
		if !strings.Contains(l, p.Namespace+"/"+p.Name) && !strings.Contains(l, string(p.UID)) {
			continue
		}
		when, text, ok := strings.Cut(l, " ")
		at, err := time.Parse("2006-01-02T15:04:05.999999Z0700", when) // journalctl -o short-iso-precise
		if ok && err == nil {
			mine = append(mine, line{at, strings.TrimSpace(text)})
		}
	}
	f, err := os.OpenFile(filepath.Join(hcfg.Repo, kubeletLog), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "== %s on %s, created %s\n", p.Name, p.Spec.NodeName, p.CreationTimestamp.UTC().Format(time.RFC3339))
		for _, l := range mine {
			fmt.Fprintf(f, "+%s %s\n", l.at.Sub(p.CreationTimestamp.Time).Round(time.Millisecond), l.text)
		}
		_ = f.Close()
	}
	if len(mine) < 2 {
		return fmt.Sprintf("%d lines", len(mine))
	}
	gap := 0
	for i := 1; i < len(mine); i++ {
		if mine[i].at.Sub(mine[i-1].at) > mine[gap+1].at.Sub(mine[gap].at) {
			gap = i - 1
		}
	}
	cut := func(s string) string {
		if _, after, ok := strings.Cut(s, "]: "); ok {
			s = after
		}
		return s[:min(140, len(s))]
	}
	return fmt.Sprintf("%d lines, longest quiet %s from +%s, after %q, until %q (all in %s)", len(mine),
		mine[gap+1].at.Sub(mine[gap].at).Round(time.Millisecond), mine[gap].at.Sub(p.CreationTimestamp.Time).Round(time.Millisecond),
		cut(mine[gap].text), cut(mine[gap+1].text), kubeletLog)
}

// --- many volumes ----------------------------------------------------------

const (
	manyVolumes   = 200
	volumesPerPod = 10
	waves         = 4
)

// manyVolumes mounts 200 volumes on every worker (each volume in one pod per
// worker, 10 volumes per pod), in waves, as hostPath volumes, emptyDirs,
// local PVs (200 per worker) and per-node volumes in turn; then deletes the
// per-node volumes.
func (b *bench) manyVolumes(ctx context.Context) {
	claims := b.volumes(ctx, "mv-pn", manyVolumes)
	perWorker := map[string]int{}
	for _, w := range b.workers {
		perWorker[w] = manyVolumes
	}
	local := b.localVolumes(ctx, "mv-lp", perWorker)
	hostDir := "/var/tmp/per-node-bench/" + b.ns
	volume := func(kind, node string, i int) corev1.Volume {
		name := fmt.Sprintf("v%03d", i)
		switch kind {
		case "pn":
			return claimVolume(name, claims[i])
		case "lp":
			return claimVolume(name, local[node][i])
		case "hp":
			return hostPathVolume(name, fmt.Sprintf("%s/mv-%03d", hostDir, i))
		}
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	podsPerWorker := manyVolumes / volumesPerPod
	build := func(kind string) [][]*corev1.Pod {
		all := make([][]*corev1.Pod, waves)
		for wi, node := range b.workers {
			for j := range podsPerWorker {
				var vols []corev1.Volume
				for k := range volumesPerPod {
					vols = append(vols, volume(kind, node, j*volumesPerPod+k))
				}
				all[j%waves] = append(all[j%waves], b.pod(fmt.Sprintf("mv-%s-%d-%d", kind, wi, j), node, vols))
			}
		}
		return all
	}
	run := func(pods [][]*corev1.Pod) time.Duration {
		start := time.Now()
		for _, wave := range pods {
			b.start(ctx, wave)
		}
		return time.Since(start)
	}
	took, ops := map[string]time.Duration{}, map[string]string{}
	var before, during map[string]driverSample
	var kubeletPN, kubeletPNAfter map[string]float64
	var peak peaks
	for _, k := range []volumeKind{kinds[2], kinds[3], kinds[1], kinds[0]} { // hostPath, emptyDir, local PV, per-node
		kubeletBefore := b.kubeletAll(ctx)
		var watch func() peaks
		if k.short == "pn" {
			before, watch = b.sampleAll(ctx), b.watchPeaks(ctx)
		}
		took[k.short] = run(build(k.short))
		kubeletAfter := b.kubeletAll(ctx)
		ops[k.short] = harness.VolumeOps(kubeletBefore, kubeletAfter, k.plugin)
		if k.short == "pn" {
			during, peak = b.sampleAll(ctx), watch()
			kubeletPN, kubeletPNAfter = kubeletBefore, kubeletAfter
		} else {
			b.deletePods(ctx)
		}
	}
	b.deleteLocalVolumes(ctx, slices.Concat(slices.Collect(maps.Values(local))...))
	b.rowKinds("kubelet's volume operations during the wave, by operation (all workers)", ops)
	b.row("kubelet's calls to the driver during the wave (all workers)", harness.CSICalls(kubeletPN, kubeletPNAfter, harness.DriverName))
	cpu, req, _ := rates(before, during)
	mounts := manyVolumes * len(b.workers)
	vsLocal := b.rowTimes(fmt.Sprintf("%d volumes on each of %d workers (%d mounts, %d waves): all Ready", manyVolumes, len(b.workers), mounts, waves),
		took, 100*time.Millisecond)
	b.goal("many volumes Ready-time, per-node / local PV <= 1.5", vsLocal <= 1.5, fmt.Sprintf("%.2f", vsLocal))
	b.row("NodePublishVolume answers during the wave, by code", publishes(before, during))
	b.row("the drivers' API requests during the wave, by verb and code", apiRequests(before, during))
	for _, n := range b.workers {
		assert.Equal(b.t, during[n].copies, float64(manyVolumes), "copies on %s after the wave", n)
	}
	b.row("driver during the wave: CPU s/min, API requests/min (per node), peak API requests/s and peak RSS (max of nodes)",
		fmt.Sprintf("%.2f s, %.1f, %.1f/s, %.1f MiB", cpu, req, peak.reqPerSec, peak.rss/mib))
	b.goal(fmt.Sprintf("driver RSS at %d copies <= 40 MiB", manyVolumes), peak.rss <= 40*mib, fmt.Sprintf("%.1f MiB", peak.rss/mib))

	b.deletePods(ctx)
	after := b.sampleAll(ctx)
	b.row(fmt.Sprintf("driver RSS after, %d copies kept (max of nodes)", manyVolumes), memory(after))
	watch := b.watchPeaks(ctx)
	gone, where := b.deleteVolumes(ctx, "mv-pn", claims)
	peak = watch()
	b.row(fmt.Sprintf("deletion of %d PVs: every PV and copy gone, after the last delete", len(claims)),
		gone.Round(100*time.Millisecond).String())
	b.row("deletion of the PVs: where each PV's time went", where)
	b.goal(fmt.Sprintf("all %d gone <= 15 s after the last delete", len(claims)), gone <= 15*time.Second, gone.Round(100*time.Millisecond).String())
	b.row("the drivers' API requests during deletion, by verb and code", apiRequests(after, b.sampleAll(ctx)))
	b.row("driver during deletion: peak API requests/s (max of nodes; at rest: the idle row's per minute)",
		fmt.Sprintf("%.1f/s", peak.reqPerSec))
}

// localVolumes makes, for each node, n local PersistentVolumes on it (a
// directory under /var/tmp/per-node-bench, node affinity to the node) with
// a claim each, prefix-<node index>-i, as the local static provisioner
// would, and waits until every claim is bound. It returns the claims by node.
func (b *bench) localVolumes(ctx context.Context, prefix string, n map[string]int) map[string][]string {
	b.t.Helper()
	out := map[string][]string{}
	sc := "bench-local"
	total := 0
	for wi, node := range b.workers {
		if n[node] == 0 {
			continue
		}
		dir := fmt.Sprintf("/var/tmp/per-node-bench/%s/%s", b.ns, prefix)
		_, err := onNode(ctx, node, "sh", "-c",
			fmt.Sprintf("for i in $(seq 0 %d); do mkdir -p %s/$i; done", n[node]-1, dir))
		assert.NilError(b.t, err)
		for i := range n[node] {
			claim := fmt.Sprintf("%s-%d-%03d", prefix, wi, i)
			pv := &corev1.PersistentVolume{
				ObjectMeta: metav1.ObjectMeta{Name: b.ns + "-" + claim},
				Spec: corev1.PersistentVolumeSpec{
					StorageClassName:              sc,
					AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
					PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
					ClaimRef:                      &corev1.ObjectReference{Namespace: b.ns, Name: claim},
					PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: fmt.Sprintf("%s/%d", dir, i)}},
					NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
						MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
					}}}},
				},
			}
			_, err := b.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
			assert.NilError(b.t, err)
			b.t.Cleanup(func() {
				_ = b.cs.CoreV1().PersistentVolumes().Delete(context.Background(), pv.Name, metav1.DeleteOptions{})
			})
			pvc := &corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: claim},
				Spec: corev1.PersistentVolumeClaimSpec{
					StorageClassName: &sc, VolumeName: pv.Name,
					AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			_, err = b.cs.CoreV1().PersistentVolumeClaims(b.ns).Create(ctx, pvc, metav1.CreateOptions{})
			assert.NilError(b.t, err)
			out[node] = append(out[node], claim)
			total++
		}
	}
	b.waitBound(ctx, prefix, total)
	return out
}

// deleteLocalVolumes deletes the local claims and their PVs (the
// directories go with the namespace's bench directory).
func (b *bench) deleteLocalVolumes(ctx context.Context, claims []string) {
	for _, c := range claims {
		assert.NilError(b.t, b.cs.CoreV1().PersistentVolumeClaims(b.ns).Delete(ctx, c, metav1.DeleteOptions{}))
		assert.NilError(b.t, b.cs.CoreV1().PersistentVolumes().Delete(ctx, b.ns+"-"+c, metav1.DeleteOptions{}))
	}
}

// kubeletAll is every worker's kubelet metrics, each series summed over
// the workers.
func (b *bench) kubeletAll(ctx context.Context) map[string]float64 {
	all := map[string]float64{}
	for _, n := range b.workers {
		m, err := harness.KubeletMetrics(ctx, b.cs, n)
		assert.NilError(b.t, err)
		for k, v := range m {
			all[k] += v
		}
	}
	return all
}

// peaks is the highest a worker's driver showed while watchPeaks ran.
type peaks struct {
	rss       float64 // bytes
	reqPerSec float64 // API requests per second, between two samples of one worker
}

// watchPeaks samples every worker's driver every 2 s until the returned
// function is called, which returns the highest resident memory and API
// request rate seen on one worker.
func (b *bench) watchPeaks(ctx context.Context) func() peaks {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var top peaks
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := map[string]driverSample{}
		for {
			for _, n := range b.workers {
				s, err := b.sample(ctx, n)
				if err != nil {
					continue
				}
				mu.Lock()
				top.rss = math.Max(top.rss, s.rss)
				if prev, ok := last[n]; ok {
					top.reqPerSec = math.Max(top.reqPerSec, (s.requests-prev.requests)/s.at.Sub(prev.at).Seconds())
				}
				mu.Unlock()
				last[n] = s
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return func() peaks {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return top
	}
}

// deleteVolumes deletes the claims prefix-*, then their PVs, and returns the
// time from the last delete until every PV is gone and no worker holds a
// copy (trash included), and where each PV's time went: from its delete
// call until the PV protection (kube-controller-manager's) let it go, and
// from there until the nodes' drivers had removed their copies and records
// and the PV was gone.
func (b *bench) deleteVolumes(ctx context.Context, prefix string, claims []string) (time.Duration, string) {
	w, err := b.cs.CoreV1().PersistentVolumes().Watch(ctx, metav1.ListOptions{})
	assert.NilError(b.t, err)
	defer w.Stop()
	var mu sync.Mutex
	deleted, unprotected, gone := map[string]time.Time{}, map[string]time.Time{}, map[string]time.Time{}
	go func() {
		for ev := range w.ResultChan() {
			pv, ok := ev.Object.(*corev1.PersistentVolume)
			if !ok || !strings.HasPrefix(pv.Name, b.ns+"-"+prefix+"-") {
				continue
			}
			mu.Lock()
			if _, seen := unprotected[pv.Name]; !seen && pv.DeletionTimestamp != nil && !slices.Contains(pv.Finalizers, "kubernetes.io/pv-protection") {
				unprotected[pv.Name] = time.Now()
			}
			if ev.Type == watch.Deleted {
				gone[pv.Name] = time.Now()
			}
			mu.Unlock()
		}
	}()
	for _, c := range claims {
		assert.NilError(b.t, b.cs.CoreV1().PersistentVolumeClaims(b.ns).Delete(ctx, c, metav1.DeleteOptions{}))
	}
	first := time.Now()
	for _, c := range claims {
		mu.Lock()
		deleted[b.ns+"-"+c] = time.Now()
		mu.Unlock()
		assert.NilError(b.t, b.cs.CoreV1().PersistentVolumes().Delete(ctx, b.ns+"-"+c, metav1.DeleteOptions{}))
	}
	last := time.Now()
	poll.WaitOn(b.t, func(poll.LogT) poll.Result {
		pvs, err := b.cs.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return poll.Continue("list PVs: %v", err)
		}
		left := 0
		for _, pv := range pvs.Items {
			if strings.HasPrefix(pv.Name, b.ns+"-"+prefix+"-") {
				left++
			}
		}
		var held []string
		for _, n := range b.workers {
			s, err := b.sample(ctx, n)
			if err != nil {
				return poll.Continue("%v", err)
			}
			if s.copies+s.beingRemoved > 0 {
				held = append(held, fmt.Sprintf("%s: %.0f copies, %.0f being removed", n, s.copies, s.beingRemoved))
			}
		}
		if left > 0 || len(held) > 0 {
			return poll.Continue("%d of %d PVs left; %v", left, len(claims), held)
		}
		return poll.Success()
	}, poll.WithTimeout(10*time.Minute), poll.WithDelay(500*time.Millisecond))
	took := time.Since(last)
	mu.Lock()
	defer mu.Unlock()
	var protection, drivers []time.Duration
	for pv, at := range deleted {
		u, ok1 := unprotected[pv]
		g, ok2 := gone[pv]
		if ok1 && ok2 {
			protection, drivers = append(protection, u.Sub(at)), append(drivers, g.Sub(u))
		}
	}
	if len(protection) == 0 {
		return took, "not seen"
	}
	return took, fmt.Sprintf("the deletes sent over %s; each PV: delete to PV protection gone median %s, max %s; then to PV gone median %s, max %s (%d PVs seen)",
		last.Sub(first).Round(100*time.Millisecond), quantile(protection, 0.5).Round(10*time.Millisecond), quantile(protection, 1).Round(10*time.Millisecond),
		quantile(drivers, 0.5).Round(10*time.Millisecond), quantile(drivers, 1).Round(10*time.Millisecond), len(protection))
}

// --- a rollout of a store with data, with and without the preference -------

// rollouts is how many times each document of e2e/bench runs (BENCH_ROLLOUTS,
// default 3): whether a replacement lands on the fresh worker is the
// scheduler's draw, so one run says little.
func rollouts(t *testing.T) int {
	v := os.Getenv("BENCH_ROLLOUTS")
	if v == "" {
		return 3
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("BENCH_ROLLOUTS=%q is not a count", v)
	}
	return n
}

// rollout runs the documents of e2e/bench, each time in a namespace of its
// own as a scenario runs, and prints what their "note" steps measured.
func (b *bench) rollout(ctx context.Context, c *envconf.Config) {
	docs, err := scenario.ParseDir(filepath.Join(hcfg.Repo, "e2e", "bench"))
	assert.NilError(b.t, err)
	figs := &scenario.Figures{}
	env := scenario.Env{Repo: hcfg.Repo, Cluster: hcfg.Clusters()[0], Kubeconfig: c.KubeconfigFile(), R: b.r,
		Images: map[string]string{"store_image": storeImage, "probe_image": probeImage}, Figures: figs}
	n := rollouts(b.t)
	for i := range n {
		for _, d := range docs {
			b.t.Run(fmt.Sprintf("%s-%d", d.Name, i+1), func(t *testing.T) { env.RunDoc(ctx, t, d) })
		}
	}
	for _, pref := range []string{"with", "without"} {
		doc := "rollout-" + pref + "-preference"
		times, fresh := figs.Values(doc, "rollout"), figs.Values(doc, "fresh")
		b.row(fmt.Sprintf("rollout of a store of 500 MiB per copy, %s the preference for nodes that hold a copy (2 replicas, copies on 3 of 4 workers; %d runs): restart to all Ready, each run", pref, n),
			rolloutTimes(times, n))
		b.row(fmt.Sprintf("rollout %s the preference: new pods that found no copy on their node", pref), freshPods(fresh, n))
		b.row(fmt.Sprintf("rollout %s the preference: a new pod's container start to its copy caught up, with a copy on its node / without", pref),
			medianOf(figs.Values(doc, "fresh-ready-copy"))+" / "+medianOf(figs.Values(doc, "fresh-ready-empty")))
		b.row(fmt.Sprintf("rollout %s the preference: records a new pod's peers streamed to it, with a copy on its node / without (the data set: 8,000)", pref),
			countsOf(figs.Values(doc, "fresh-received-copy"))+" / "+countsOf(figs.Values(doc, "fresh-received-empty")))
	}
	const fresh = "a-pod-on-a-fresh-node"
	b.row("a store pod on a node that never held the volume, beside copies of 500 MiB (scale-up from 3 to 4): container start to its copy caught up",
		medianOf(figs.Values(fresh, "fresh-ready-empty")))
	b.row("a store pod on a node that never held the volume: records its peers streamed to it (the data set: 8,000)",
		countsOf(figs.Values(fresh, "fresh-received-empty")))
}

// rolloutTimes lists each run's time and their median; a run that failed
// before its figure is counted as missing.
func rolloutTimes(times []string, runs int) string {
	d := durations(times)
	if len(d) == 0 {
		return "not measured (every run failed)"
	}
	out := strings.Join(times, ", ") + fmt.Sprintf(" (median %s)", quantile(d, 0.5))
	if len(d) < runs {
		out += fmt.Sprintf("; %d of %d runs failed", runs-len(d), runs)
	}
	return out
}

// durations are the values noted that read as durations.
func durations(noted []string) []time.Duration {
	var d []time.Duration
	for _, v := range noted {
		if t, err := time.ParseDuration(v); err == nil {
			d = append(d, t)
		}
	}
	return d
}

// medianOf is the median of durations noted, and how many there were.
func medianOf(noted []string) string {
	d := durations(noted)
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("median %s of %d", quantile(d, 0.5), len(d))
}

// countsOf lists counts noted, or says there were none.
func countsOf(noted []string) string {
	if len(noted) == 0 {
		return "none"
	}
	return strings.Join(noted, ", ")
}

// freshPods adds up the runs' "k of n (pods)" notes.
func freshPods(notes []string, runs int) string {
	var k, n int
	var which []string
	for _, v := range notes {
		var a, b int
		if _, err := fmt.Sscanf(v, "%d of %d", &a, &b); err == nil {
			k, n = k+a, n+b
		}
		if _, pods, ok := strings.Cut(v, " ("); ok {
			which = append(which, strings.TrimSuffix(pods, ")"))
		}
	}
	out := fmt.Sprintf("%d of %d", k, n)
	if len(which) > 0 {
		out += " (" + strings.Join(which, "; ") + ")"
	}
	if len(notes) < runs {
		out += fmt.Sprintf("; %d of %d runs failed", runs-len(notes), runs)
	}
	return out
}
