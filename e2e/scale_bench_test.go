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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/internal/harness"
)

// TestScale measures, for `make bench-e2e`, what the driver costs next to a
// baseline measured in the same run: pod start with a per-node claim against
// the same pod with a hostPath volume; 200 per-node volumes mounted on every
// worker against 200 hostPath volumes; their deletion; the driver's memory,
// CPU and API requests on each node, idle and under that load. It prints a
// table and one line per goal, met or not.
func TestScale(t *testing.T) {
	f := features.New("scale").Assess("bench-e2e", func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
		r := client(t, c)
		cs, err := kubernetes.NewForConfig(unthrottled(r.GetConfig()))
		assert.NilError(t, err)
		b := &bench{t: t, r: r, cs: cs, ns: newNamespace(t, r), workers: workers(t, r), ready: map[string]*corev1.Pod{}}
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

// benchParts reads BENCH_PARTS (idle, podstart, many; comma-separated),
// every part when it is empty. The table has the rows of the parts run.
func benchParts(t *testing.T) map[string]bool {
	all := []string{"idle", "podstart", "many"}
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
	ready   map[string]*corev1.Pod // each pod as the watch first showed it Ready
}

type benchRow struct{ figure, perNode, baseline, ratio string }

func (b *bench) row(figure, perNode, baseline, ratio string) {
	b.rows = append(b.rows, benchRow{figure, perNode, baseline, ratio})
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
	fmt.Printf("bench-e2e: | figure | per-node | baseline (hostPath) | ratio |\n")
	fmt.Printf("bench-e2e: |---|---|---|---|\n")
	for _, r := range b.rows {
		fmt.Printf("bench-e2e: | %s | %s | %s | %s |\n", r.figure, r.perNode, r.baseline, r.ratio)
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
	b.row("driver idle: CPU s/min, API requests/min, RSS (max of nodes)",
		fmt.Sprintf("%.3f s, %.2f, %s", cpu, req, memory(after)), "", "")
	b.goal("idle CPU ~0 (<= 0.1 s/min per node)", cpu <= 0.1, fmt.Sprintf("%.3f s/min", cpu))
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
		out = append(out, ready[p.Name].Sub(created[p.Name]))
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
	return claims
}

// --- pod start -------------------------------------------------------------

const podStartEach = 20

func (b *bench) podStart(ctx context.Context) {
	node := b.workers[0]
	claims := b.volumes(ctx, "ps", 2*podStartEach)
	hostDir := "/var/tmp/per-node-bench/" + b.ns
	var seqPN, seqHP, parPN, parHP []time.Duration
	before := b.sampleAll(ctx)
	kubeletBefore, err := harness.KubeletMetrics(ctx, b.cs, node)
	assert.NilError(b.t, err)
	for i := range podStartEach { // one of each, alternated
		seqPN = append(seqPN, b.start(ctx, []*corev1.Pod{b.pod(fmt.Sprintf("seq-pn-%d", i), node,
			[]corev1.Volume{claimVolume("data", claims[i])})})...)
		seqHP = append(seqHP, b.start(ctx, []*corev1.Pod{b.pod(fmt.Sprintf("seq-hp-%d", i), node,
			[]corev1.Volume{hostPathVolume("data", fmt.Sprintf("%s/seq-%d", hostDir, i))})})...)
	}
	b.deletePods(ctx)
	for round := range podStartEach / 10 { // ten at once, alternated
		var pn, hp []*corev1.Pod
		for i := range 10 {
			k := round*10 + i
			pn = append(pn, b.pod(fmt.Sprintf("par-pn-%d", k), node, []corev1.Volume{claimVolume("data", claims[podStartEach+k])}))
			hp = append(hp, b.pod(fmt.Sprintf("par-hp-%d", k), node, []corev1.Volume{hostPathVolume("data", fmt.Sprintf("%s/par-%d", hostDir, k))}))
		}
		parPN = append(parPN, b.start(ctx, pn)...)
		parHP = append(parHP, b.start(ctx, hp)...)
	}
	afterStart := b.sampleAll(ctx)
	b.row("NodePublishVolume answers during pod start, by code", publishes(before, afterStart), "", "")
	b.row("the drivers' API requests during pod start, by verb and code", apiRequests(before, afterStart), "", "")
	kubeletAfter, err := harness.KubeletMetrics(ctx, b.cs, node)
	assert.NilError(b.t, err)
	b.row("kubelet's volume operations during pod start, by operation", harness.VolumeOps(kubeletBefore, kubeletAfter, csiPlugin),
		harness.VolumeOps(kubeletBefore, kubeletAfter, hostPathPlugin), "")
	b.row("kubelet's calls to the driver during pod start (its csi_operations_seconds)",
		harness.CSICalls(kubeletBefore, kubeletAfter, harness.DriverName), "", "")
	b.row("Warning events on the pods, by reason", b.podWarnings(ctx, "-pn-"), b.podWarnings(ctx, "-hp-"), "")
	for _, mode := range []string{"seq", "par"} {
		b.row(fmt.Sprintf("pod start %s, median of each phase (pod conditions, 1 s steps)", mode),
			b.phases(mode+"-pn-"), b.phases(mode+"-hp-"), "")
	}
	b.deletePods(ctx)
	b.deleteVolumes(ctx, "ps", claims)
	for _, c := range []struct {
		name   string
		pn, hp []time.Duration
	}{{"sequential", seqPN, seqHP}, {"10 at once", parPN, parHP}} {
		for _, q := range []struct {
			name  string
			p     float64
			limit float64
		}{{"median", 0.5, 1.10}, {"p95", 0.95, 1.25}} {
			pn, hp := quantile(c.pn, q.p), quantile(c.hp, q.p)
			ratio := pn.Seconds() / hp.Seconds()
			b.row(fmt.Sprintf("pod start %s, %s (%d each, one node)", c.name, q.name, len(c.pn)),
				pn.Round(time.Millisecond).String(), hp.Round(time.Millisecond).String(), fmt.Sprintf("%.2f", ratio))
			b.goal(fmt.Sprintf("pod start %s %s ratio <= %.2f", c.name, q.name, q.limit), ratio <= q.limit, fmt.Sprintf("%.2f", ratio))
		}
	}
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
	hostPathPlugin = "kubernetes.io/host-path"
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

// --- many volumes ----------------------------------------------------------

const (
	manyVolumes   = 200
	volumesPerPod = 10
	waves         = 4
)

// manyVolumes mounts 200 volumes on every worker (each volume in one pod per
// worker, 10 volumes per pod), in waves, first as hostPath volumes, then as
// per-node volumes; then deletes the per-node volumes.
func (b *bench) manyVolumes(ctx context.Context) {
	claims := b.volumes(ctx, "mv", manyVolumes)
	podsPerWorker := manyVolumes / volumesPerPod
	build := func(kind string, vol func(i int) corev1.Volume) [][]*corev1.Pod {
		all := make([][]*corev1.Pod, waves)
		for wi, node := range b.workers {
			for j := range podsPerWorker {
				var vols []corev1.Volume
				for k := range volumesPerPod {
					vols = append(vols, vol(j*volumesPerPod+k))
				}
				p := b.pod(fmt.Sprintf("%s-%d-%d", kind, wi, j), node, vols)
				wave := j % waves
				all[wave] = append(all[wave], p)
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
	hostDir := "/var/tmp/per-node-bench/" + b.ns
	kubeletHP := b.kubeletAll(ctx)
	hp := run(build("mv-hp", func(i int) corev1.Volume {
		return hostPathVolume(fmt.Sprintf("v%03d", i), fmt.Sprintf("%s/mv-%03d", hostDir, i))
	}))
	kubeletHPAfter := b.kubeletAll(ctx)
	b.deletePods(ctx)

	before := b.sampleAll(ctx)
	kubeletPN := b.kubeletAll(ctx)
	peak := b.watchPeakRSS(ctx)
	pn := run(build("mv-pn", func(i int) corev1.Volume { return claimVolume(fmt.Sprintf("v%03d", i), claims[i]) }))
	during := b.sampleAll(ctx)
	kubeletPNAfter := b.kubeletAll(ctx)
	peakRSS := peak()
	b.row("kubelet's volume operations during the wave, by operation (all workers)",
		harness.VolumeOps(kubeletPN, kubeletPNAfter, csiPlugin), harness.VolumeOps(kubeletHP, kubeletHPAfter, hostPathPlugin), "")
	b.row("kubelet's calls to the driver during the wave (all workers)",
		harness.CSICalls(kubeletPN, kubeletPNAfter, harness.DriverName), "", "")
	cpu, req, _ := rates(before, during)
	ratio := pn.Seconds() / hp.Seconds()
	mounts := manyVolumes * len(b.workers)
	b.row(fmt.Sprintf("%d volumes on each of %d workers (%d mounts, %d waves): all Ready", manyVolumes, len(b.workers), mounts, waves),
		pn.Round(100*time.Millisecond).String(), hp.Round(100*time.Millisecond).String(), fmt.Sprintf("%.2f", ratio))
	b.goal("many volumes Ready-time ratio <= 1.2", ratio <= 1.2, fmt.Sprintf("%.2f", ratio))
	b.row("NodePublishVolume answers during the wave, by code", publishes(before, during), "", "")
	b.row("the drivers' API requests during the wave, by verb and code", apiRequests(before, during), "", "")
	for _, n := range b.workers {
		assert.Equal(b.t, during[n].copies, float64(manyVolumes), "copies on %s after the wave", n)
	}
	b.row("driver during the wave: CPU s/min, API requests/min (per node), peak RSS (max of nodes)",
		fmt.Sprintf("%.2f s, %.1f, %.1f MiB", cpu, req, peakRSS/mib), "", "")
	b.goal(fmt.Sprintf("driver RSS at %d copies <= 40 MiB", manyVolumes), peakRSS <= 40*mib, fmt.Sprintf("%.1f MiB", peakRSS/mib))

	b.deletePods(ctx)
	after := b.sampleAll(ctx)
	b.row(fmt.Sprintf("driver RSS after, %d copies kept (max of nodes)", manyVolumes), memory(after), "", "")
	took := b.deleteVolumes(ctx, "mv", claims)
	b.row(fmt.Sprintf("deletion of %d PVs: every PV and copy gone, after the last delete", len(claims)),
		took.Round(100*time.Millisecond).String(), "", "")
	b.goal(fmt.Sprintf("all %d gone <= 30 s after the last delete", len(claims)), took <= 30*time.Second, took.Round(100*time.Millisecond).String())
	b.row("the drivers' API requests during deletion, by verb and code", apiRequests(after, b.sampleAll(ctx)), "", "")
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

// watchPeakRSS samples every worker's driver RSS every 2 s until the
// returned function is called, which returns the highest seen.
func (b *bench) watchPeakRSS(ctx context.Context) func() float64 {
	ctx, cancel := context.WithCancel(ctx)
	var mu sync.Mutex
	var peak float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			for _, n := range b.workers {
				if s, err := b.sample(ctx, n); err == nil {
					mu.Lock()
					peak = math.Max(peak, s.rss)
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return func() float64 {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// deleteVolumes deletes the claims prefix-*, then their PVs, and returns the
// time from the last delete until every PV is gone and no worker holds a
// copy (trash included).
func (b *bench) deleteVolumes(ctx context.Context, prefix string, claims []string) time.Duration {
	for _, c := range claims {
		assert.NilError(b.t, b.cs.CoreV1().PersistentVolumeClaims(b.ns).Delete(ctx, c, metav1.DeleteOptions{}))
	}
	for _, c := range claims {
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
	return time.Since(last)
}
