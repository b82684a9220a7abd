// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e && e2ebench

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/poll"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"liken.sh/per-node/e2e/internal/harness"
)

// TestScaleAPI measures, for `make bench-scale`, what the driver's design
// costs as the cluster grows, on the e2e cluster's real API server and
// etcd: SCALE_NODES (default 100,1000,5000) Node objects, SCALE_OTHER_PVS
// (default 20,000) PersistentVolumes of another driver, and SCALE_DRIVERS
// (default 10) real driver processes on this host, each with the identity
// of its own node (the driver's account impersonated with the node-name
// extra a bound token carries, as scenario 20 does), publishing and
// unpublishing with real bind mounts. For each N it prints, each beside
// its goal, met or NOT met:
//   - each host driver's RSS (goal: at most 40 MiB);
//   - the admission of one record change by a node (its Copy created) when
//     N other nodes hold a Copy of the PV (median of 5), beside an
//     administrator deleting it, which no policy checks (goal: at most 0.3 s);
//   - for one record change of a PV another host driver recorded first,
//     the PVs and Copies the other host drivers' watches deliver (goal:
//     none), and for one change
//     of a Node none of them runs on, the Nodes their watches deliver (goal:
//     none), counted by each driver (per_node_api_objects_received_total);
//     beside them, the watch events and bytes the API server counted for
//     every watcher;
//
// and, once: the time from deleting a PV to its disappearance with 3
// copies, and with 3 copies and the Copies of 997 nodes that are gone.
func TestScaleAPI(t *testing.T) {
	f := features.New("scale").Assess("bench-scale", func(ctx context.Context, t *testing.T, c *envconf.Config) context.Context {
		r := client(t, c)
		cs, err := kubernetes.NewForConfig(unthrottled(r.GetConfig()))
		assert.NilError(t, err)
		s := &scale{t: t, cs: cs, kubeconfig: c.KubeconfigFile(), dir: t.TempDir()}
		sizes := envInts(t, "SCALE_NODES", []int{100, 1000, 5000})
		drivers := envInts(t, "SCALE_DRIVERS", []int{10})[0]
		others := envInts(t, "SCALE_OTHER_PVS", []int{20000})[0]

		t.Cleanup(s.cleanup)
		s.makeNodes(ctx, drivers) // the host drivers' own Nodes
		s.makeOtherPVs(ctx, others)
		for i := range drivers {
			s.startDriver(ctx, i)
		}
		for _, n := range sizes {
			part := fmt.Sprintf("N=%d", n)
			s.makeNodes(ctx, n)
			s.quiet(ctx)
			s.row(part, "host driver RSS, largest (MiB)", s.largestRSS()/(1<<20), "<= 40", s.largestRSS() <= 40<<20)
			drv, adm := s.admission(ctx, n)
			s.row(part, "admission of a record change (a Copy), node (s)", drv.Seconds(), "<= 0.3", drv <= 300*time.Millisecond)
			s.row(part, "that Copy deleted by an administrator (s)", adm.Seconds(), "-", true)
			s.quiet(ctx)
			sent, pvs, copies := s.recordChange(ctx)
			s.row(part, "PVs sent to the other host drivers per record change", pvs, "0", pvs == 0)
			s.row(part, "Copies sent to the other host drivers per record change", copies, "0", copies == 0)
			s.row(part, "API server: PV watch events per record change, all watchers", sent.events, "-", true)
			s.row(part, "API server: PV watch bytes per record change (KiB)", sent.bytes/1024, "-", true)
			s.quiet(ctx)
			sent, got := s.nodeChange(ctx)
			s.row(part, "Nodes sent to the host drivers per other Node's change", got, "0", got == 0)
			s.row(part, "API server: Node watch events per Node change, all watchers", sent.events, "-", true)
		}
		three := s.deleteTiming(ctx, 3, 0)
		s.row("C=3", "PV delete to PV gone (s)", three.Seconds(), "<= 3", three <= 3*time.Second)
		many := s.deleteTiming(ctx, 3, 997)
		s.row("C=1000", "PV delete to PV gone, 997 of the nodes gone (s)", many.Seconds(), "<= 30", many <= 30*time.Second)
		if many >= deleteLimit {
			s.t.Logf("the PV with 997 gone nodes' records was not gone after %s", deleteLimit)
		}
		s.print()
		return ctx
	}).Feature()
	testenv.Test(t, f)
}

// scale is one run of TestScaleAPI.
type scale struct {
	t          *testing.T
	cs         kubernetes.Interface
	kubeconfig string
	dir        string
	drivers    []*hostDriver
	nodes      int
	rows       []string
	pvs        []string
}

// hostDriver is a driver process on this host acting as one node.
type hostDriver struct {
	node, dir string
	health    string // the address of its /metrics
	cmd       *osexec.Cmd
	conn      *grpc.ClientConn
	csi       csi.NodeClient
}

const scaleNodePrefix = "per-node-scale-"

func scaleNode(i int) string { return fmt.Sprintf("%s%05d", scaleNodePrefix, i) }

func envInts(t *testing.T, name string, def []int) []int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		assert.NilError(t, err, "%s=%q", name, v)
		out = append(out, n)
	}
	return out
}

func (s *scale) row(part, what string, got any, goal string, met bool) {
	verdict := "met"
	if !met {
		verdict = "NOT met"
	}
	if goal == "-" {
		verdict = ""
	}
	line := fmt.Sprintf("bench-scale %-7s %-55s %10s  goal %-18s %s", part, what, format(got), goal, verdict)
	s.t.Log(line)
	s.rows = append(s.rows, line)
}

func format(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return fmt.Sprint(v)
}

func (s *scale) print() {
	for _, l := range s.rows {
		fmt.Println(l)
	}
}

// parallel runs f for 0..n-1 on 32 goroutines.
func parallel(n int, f func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				if err := f(i); err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// makeNodes creates Node objects until there are n of the bench's.
func (s *scale) makeNodes(ctx context.Context, n int) {
	from := s.nodes
	err := parallel(max(n-from, 0), func(i int) error {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: scaleNode(from + i),
			Labels: map[string]string{"per-node.liken.sh/bench": "scale"}}}
		_, err := s.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	assert.NilError(s.t, err)
	s.nodes = max(n, s.nodes)
}

// makeOtherPVs creates n PersistentVolumes of another CSI driver.
func (s *scale) makeOtherPVs(ctx context.Context, n int) {
	err := parallel(n, func(i int) error {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("per-node-scale-other-%05d", i),
				Labels: map[string]string{"per-node.liken.sh/bench": "scale"}},
			Spec: corev1.PersistentVolumeSpec{
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
					Driver: "ebs.csi.example.com", VolumeHandle: fmt.Sprintf("vol-%012d", i)}},
			},
		}
		_, err := s.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	assert.NilError(s.t, err)
}

// ourPV creates a per-node PV named name (the guide's, with no claim).
func (s *scale) ourPV(ctx context.Context, name string) {
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"per-node.liken.sh/bench": "scale"}},
		Spec: corev1.PersistentVolumeSpec{
			StorageClassName:              "per-node",
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{
				Driver: harness.DriverName, VolumeHandle: name}},
		},
	}
	_, err := s.cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	assert.NilError(s.t, err)
	s.pvs = append(s.pvs, name)
}

// startDriver starts the driver binary the harness built as node i, with
// the driver's account impersonated for that node.
func (s *scale) startDriver(ctx context.Context, i int) {
	d := &hostDriver{node: scaleNode(i), dir: filepath.Join(s.dir, scaleNode(i)), health: freeLocalAddr(s.t)}
	assert.NilError(s.t, os.MkdirAll(filepath.Join(d.dir, "kubelet", "pods"), 0o755))
	cfg, err := clientcmd.LoadFromFile(s.kubeconfig)
	assert.NilError(s.t, err)
	for _, a := range cfg.AuthInfos {
		a.Impersonate = "system:serviceaccount:per-node-system:per-node-node"
		a.ImpersonateGroups = []string{"system:serviceaccounts", "system:serviceaccounts:per-node-system", "system:authenticated"}
		a.ImpersonateUserExtra = map[string][]string{"authentication.kubernetes.io/node-name": {d.node}}
	}
	kc := filepath.Join(d.dir, "kubeconfig")
	assert.NilError(s.t, clientcmd.WriteToFile(*cfg, kc))
	sock := filepath.Join(d.dir, "csi.sock")
	d.cmd = osexec.Command(filepath.Join(hcfg.Repo, "bin", "per-node"),
		"--node-id="+d.node, "--kubeconfig="+kc, "--root="+filepath.Join(d.dir, "root"),
		"--endpoint=unix://"+sock, "--registration-dir=", "--health-address="+d.health,
		"--kubelet-dir="+filepath.Join(d.dir, "kubelet"))
	logf, err := os.Create(filepath.Join(d.dir, "driver.log"))
	assert.NilError(s.t, err)
	d.cmd.Stdout, d.cmd.Stderr = logf, logf
	assert.NilError(s.t, d.cmd.Start())
	s.drivers = append(s.drivers, d)
	poll.WaitOn(s.t, func(poll.LogT) poll.Result {
		if _, err := os.Stat(sock); err != nil {
			return poll.Continue("the driver of %s has no socket yet (log %s)", d.node, logf.Name())
		}
		return poll.Success()
	}, poll.WithTimeout(time.Minute))
	d.conn, err = grpc.NewClient("unix://"+sock, grpc.WithTransportCredentials(insecure.NewCredentials()))
	assert.NilError(s.t, err)
	d.csi = csi.NewNodeClient(d.conn)
}

func (d *hostDriver) target(handle string) string {
	return filepath.Join(d.dir, "kubelet", "pods", "0000-"+handle, "volumes", "kubernetes.io~csi", handle, "mount")
}

func (d *hostDriver) publish(ctx context.Context, handle string) error {
	_, err := d.csi.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: handle, TargetPath: d.target(handle),
		VolumeCapability: &csi.VolumeCapability{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER},
		},
		VolumeContext: map[string]string{
			"csi.storage.k8s.io/pod.namespace": "bench", "csi.storage.k8s.io/pod.name": "holder-" + handle,
		},
	})
	return err
}

func (d *hostDriver) unpublish(ctx context.Context, handle string) error {
	_, err := d.csi.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: handle, TargetPath: d.target(handle)})
	return err
}

// quiet waits until the host drivers' watches have delivered nothing for
// 10 s: the cluster has taken in what the bench made (the PV controller
// marks every new PV Available, the node controller taints every new Node
// it never heard from, each reaching every driver). It gives up after
// SCALE_QUIET (default 15 min) and says so: a cluster that never quiets
// down is a figure too.
func (s *scale) quiet(ctx context.Context) {
	limit := 15 * time.Minute
	if v := os.Getenv("SCALE_QUIET"); v != "" {
		d, err := time.ParseDuration(v)
		assert.NilError(s.t, err)
		limit = d
	}
	start := time.Now()
	last := s.received(s.drivers, "persistentvolumes") + s.received(s.drivers, "nodes")
	for time.Since(start) < limit {
		select {
		case <-ctx.Done():
			return
		case <-time.After(10 * time.Second): // the quiet window
		}
		now := s.received(s.drivers, "persistentvolumes") + s.received(s.drivers, "nodes")
		if now == last {
			s.t.Logf("quiet after %s", time.Since(start).Round(time.Second))
			return
		}
		s.t.Logf("the host drivers received %.0f objects in 10 s; waiting for quiet", now-last)
		last = now
	}
	s.t.Logf("never quiet in %s: the figures below include what the cluster was still sending", limit)
}

func (s *scale) largestRSS() int64 {
	var most int64
	for _, d := range s.drivers {
		most = max(most, rss(s.t, d.cmd.Process.Pid))
	}
	return most
}

// rss is a process's resident set in bytes, from /proc.
func rss(t *testing.T, pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	assert.NilError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			assert.NilError(t, err)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for process %d", pid)
	return 0
}

// admissionTries is how many times a record change is timed.
const admissionTries = 5

// admission times one record change by a node (its own Copy created, as
// the driver does) and an administrator deleting that Copy, which no policy
// checks, beside the Copies of n other nodes: the medians of
// admissionTries.
func (s *scale) admission(ctx context.Context, n int) (node, admin time.Duration) {
	name := fmt.Sprintf("per-node-scale-records-%d", n)
	s.ourPV(ctx, name)
	pv, err := s.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
	assert.NilError(s.t, err)
	nodes := make([]string, n)
	for i := range n {
		nodes[i] = scaleNode(i)
	}
	s.makeCopies(ctx, pv, nodes)
	as := s.copiesAs(scaleNode(n)) // a node that is not recorded yet
	admins := s.copiesAs("")
	// The median of admissionTries: one request is at the mercy of whatever
	// else the API server is doing at that moment.
	var created, deleted []time.Duration
	for range admissionTries {
		start := time.Now()
		made, err := as.Create(ctx, ownedCopy(pv, scaleNode(n)), metav1.CreateOptions{})
		created = append(created, time.Since(start))
		assert.NilError(s.t, err, "the node's own Copy was refused")
		start = time.Now()
		assert.NilError(s.t, admins.Delete(ctx, made.GetName(), metav1.DeleteOptions{}), "an administrator's deletion")
		deleted = append(deleted, time.Since(start))
	}
	median := func(d []time.Duration) time.Duration { slices.Sort(d); return d[len(d)/2] }
	s.deleteCopiesOf(ctx, name)
	assert.NilError(s.t, s.cs.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}))
	return median(created), median(deleted)
}

// copyGVR is the Copy resource (deploy/crd.yaml).
var copyGVR = schema.GroupVersionResource{Group: "per-node.liken.sh", Version: "v1alpha1", Resource: "copies"}

// copyObject is the Copy of pv on node that no Node owns, as an
// administrator or a restore writes it.
func copyObject(pv *corev1.PersistentVolume, node string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": copyGVR.GroupVersion().String(), "kind": "Copy",
		"metadata": map[string]any{"generateName": pv.Name + "-",
			"labels": map[string]any{"per-node.liken.sh/volume": pv.Name, "per-node.liken.sh/volume-uid": string(pv.UID),
				"per-node.liken.sh/node": node}},
		"spec": map[string]any{"volume": pv.Name, "volumeUID": string(pv.UID), "node": node},
	}}
}

// ownedCopy is the Copy of pv on node owned by the node's Node, as the
// driver makes it (the admission policy checks the owner's name, not its
// UID: the Node need not exist here).
func ownedCopy(pv *corev1.PersistentVolume, node string) *unstructured.Unstructured {
	u := copyObject(pv, node)
	u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node,
		UID: types.UID("0b5c3a1e-6f0e-4c1b-9a53-" + fmt.Sprintf("%012d", len(node)))}})
	return u
}

// copiesAs is a client of Copies with the driver's account on node, or an
// administrator's ("").
func (s *scale) copiesAs(node string) dynamic.NamespaceableResourceInterface {
	cfg, err := clientcmd.BuildConfigFromFlags("", s.kubeconfig)
	assert.NilError(s.t, err)
	cfg = unthrottled(cfg)
	if node != "" {
		cfg.Impersonate = driverIdentity(node)
	}
	d, err := dynamic.NewForConfig(cfg)
	assert.NilError(s.t, err)
	return d.Resource(copyGVR)
}

// makeCopies creates, as an administrator, the Copies of pv on nodes.
func (s *scale) makeCopies(ctx context.Context, pv *corev1.PersistentVolume, nodes []string) {
	c := s.copiesAs("")
	assert.NilError(s.t, parallel(len(nodes), func(i int) error {
		_, err := c.Create(ctx, copyObject(pv, nodes[i]), metav1.CreateOptions{})
		return err
	}))
}

// deleteCopiesOf deletes every Copy of the PV named name, one DELETE each
// (a DeleteCollection of thousands outlasts the API server's request
// timeout).
func (s *scale) deleteCopiesOf(ctx context.Context, name string) {
	c := s.copiesAs("")
	l, err := c.List(ctx, metav1.ListOptions{LabelSelector: "per-node.liken.sh/volume=" + name})
	assert.NilError(s.t, err)
	assert.NilError(s.t, parallel(len(l.Items), func(i int) error {
		err := c.Delete(ctx, l.Items[i].GetName(), metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}))
}

// driverIdentity is the driver's account on node, as its bound token says.
func driverIdentity(node string) rest.ImpersonationConfig {
	return rest.ImpersonationConfig{
		UserName: "system:serviceaccount:per-node-system:per-node-node",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:per-node-system", "system:authenticated"},
		Extra:    map[string][]string{"authentication.kubernetes.io/node-name": {node}},
	}
}

// watchSent is what the API server counted of the watch events it sent.
type watchSent struct{ events, bytes float64 }

// watchEvents reads the API server's apiserver_watch_events_total and
// apiserver_watch_events_sizes for a resource (the label is resource or
// kind, by version).
func (s *scale) watchEvents(ctx context.Context, resource, kind string) watchSent {
	raw, err := s.cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	assert.NilError(s.t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	assert.NilError(s.t, err)
	matches := func(ls []*dto.LabelPair) bool {
		for _, l := range ls {
			if (l.GetName() == "resource" && l.GetValue() == resource) || (l.GetName() == "kind" && l.GetValue() == kind) {
				return true
			}
		}
		return false
	}
	var w watchSent
	for _, m := range fams["apiserver_watch_events_total"].GetMetric() {
		if matches(m.GetLabel()) {
			w.events += m.GetCounter().GetValue()
		}
	}
	for _, m := range fams["apiserver_watch_events_sizes"].GetMetric() {
		if matches(m.GetLabel()) {
			w.bytes += m.GetHistogram().GetSampleSum()
		}
	}
	return w
}

// recordChange is what one record change sends: node 0's driver publishes
// a PV that node 1 already recorded (a pod moved to a node that had no
// copy), which creates node 0's Copy and changes nothing of the PV. It
// returns the PV watch events and bytes the API server counted over a
// window of 5 s around it, for every watcher, and the PVs and Copies the
// other host drivers' watches delivered meanwhile
// (per_node_api_objects_received_total), which none of them needs.
func (s *scale) recordChange(ctx context.Context) (sent watchSent, pvs, copies float64) {
	name := fmt.Sprintf("per-node-scale-event-%d", len(s.pvs))
	s.ourPV(ctx, name)
	first, holder, others := s.drivers[1], s.drivers[0], s.drivers[1:]
	assert.NilError(s.t, first.publish(ctx, name)) // the PV's finalizer: once in its life
	assert.NilError(s.t, first.unpublish(ctx, name))
	s.quiet(ctx)
	before := s.watchEvents(ctx, "persistentvolumes", "PersistentVolume")
	gotPVs, gotCopies := s.received(others, "persistentvolumes"), s.received(others, "copies")
	assert.NilError(s.t, holder.publish(ctx, name))
	s.settleBriefly(ctx)
	after := s.watchEvents(ctx, "persistentvolumes", "PersistentVolume")
	pvs, copies = s.received(others, "persistentvolumes")-gotPVs, s.received(others, "copies")-gotCopies
	assert.NilError(s.t, holder.unpublish(ctx, name))
	return watchSent{after.events - before.events, after.bytes - before.bytes}, pvs, copies
}

// nodeChange is what one change of a Node no host driver runs on sends (a
// label, as an operator or kubelet would change it): the Node watch events
// the API server counted, for every watcher, and the Nodes the host
// drivers' watches delivered.
func (s *scale) nodeChange(ctx context.Context) (watchSent, float64) {
	other := scaleNode(s.nodes - 1)
	before, got := s.watchEvents(ctx, "nodes", "Node"), s.received(s.drivers, "nodes")
	patch := fmt.Appendf(nil, `{"metadata":{"labels":{"per-node.liken.sh/bench-touch":%q}}}`, strconv.FormatInt(time.Now().UnixNano(), 10))
	_, err := s.cs.CoreV1().Nodes().Patch(ctx, other, types.MergePatchType, patch, metav1.PatchOptions{})
	assert.NilError(s.t, err)
	s.settleBriefly(ctx)
	after, gotAfter := s.watchEvents(ctx, "nodes", "Node"), s.received(s.drivers, "nodes")
	return watchSent{after.events - before.events, after.bytes - before.bytes}, gotAfter - got
}

// received sums per_node_api_objects_received_total{resource} of drivers.
func (s *scale) received(drivers []*hostDriver, resource string) float64 {
	total := 0.0
	for _, d := range drivers {
		resp, err := http.Get("http://" + d.health + "/metrics")
		assert.NilError(s.t, err)
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		_ = resp.Body.Close()
		assert.NilError(s.t, err)
		for _, m := range fams["per_node_api_objects_received_total"].GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "resource" && l.GetValue() == resource {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// freeLocalAddr is a loopback address with a port free a moment ago.
func freeLocalAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	assert.NilError(t, err)
	defer l.Close()
	return l.Addr().String()
}

func (s *scale) settleBriefly(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second): // a measurement window
	}
}

// deleteTiming is the time from deleting a PV to its disappearance, with
// a copy on live host drivers and the records of gone nodes (names of
// Nodes that do not exist) written by an administrator.
func (s *scale) deleteTiming(ctx context.Context, live, gone int) time.Duration {
	assert.Assert(s.t, live <= len(s.drivers), "%d live copies need as many host drivers, have %d", live, len(s.drivers))
	name := fmt.Sprintf("per-node-scale-delete-%d-%d", live, gone)
	s.ourPV(ctx, name)
	for _, d := range s.drivers[:live] {
		assert.NilError(s.t, d.publish(ctx, name))
		assert.NilError(s.t, d.unpublish(ctx, name))
	}
	if gone > 0 {
		pv, err := s.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		assert.NilError(s.t, err)
		nodes := make([]string, gone)
		for i := range gone {
			nodes[i] = fmt.Sprintf("per-node-scale-gone-%05d", i)
		}
		s.makeCopies(ctx, pv, nodes)
	}
	start := time.Now()
	assert.NilError(s.t, s.cs.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{}))
	// Not a poll.WaitOn: a PV that does not go is a figure (NOT met), and
	// the table is still printed.
	logged := start
	for time.Since(start) < deleteLimit {
		pv, err := s.cs.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return time.Since(start)
		}
		if err == nil && time.Since(logged) > 10*time.Second {
			left, _ := s.copiesAs("").List(ctx, metav1.ListOptions{LabelSelector: "per-node.liken.sh/volume=" + name})
			s.t.Logf("PV %s: finalizers %v, %d Copies left after %s", name, pv.Finalizers, len(left.Items), time.Since(start).Round(time.Second))
			logged = time.Now()
		}
		select {
		case <-ctx.Done():
			return deleteLimit
		case <-time.After(200 * time.Millisecond): // a sampling interval
		}
	}
	return deleteLimit
}

// deleteLimit is how long a PV deletion is waited for; a PV still there
// is reported as taking this long.
const deleteLimit = 10 * time.Minute

// cleanup stops the host drivers (their mounts go with their directories)
// and deletes what the bench made.
func (s *scale) cleanup() {
	ctx := context.Background()
	for _, d := range s.drivers {
		if d.conn != nil {
			_ = d.conn.Close()
		}
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
		_ = filepath.WalkDir(filepath.Join(d.dir, "kubelet"), func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() && filepath.Base(p) == "mount" {
				_ = unix.Unmount(p, unix.MNT_DETACH)
			}
			return nil
		})
	}
	sel := metav1.ListOptions{LabelSelector: "per-node.liken.sh/bench=scale"}
	if pvs, err := s.cs.CoreV1().PersistentVolumes().List(ctx, sel); err == nil {
		_ = parallel(len(pvs.Items), func(i int) error {
			name := pvs.Items[i].Name
			_, _ = s.cs.CoreV1().PersistentVolumes().Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
			return s.cs.CoreV1().PersistentVolumes().Delete(ctx, name, metav1.DeleteOptions{})
		})
	}
	_ = s.cs.CoreV1().Nodes().DeleteCollection(ctx, metav1.DeleteOptions{}, sel)
	if l, err := s.copiesAs("").List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range l.Items {
			if v, _, _ := unstructured.NestedString(c.Object, "spec", "volume"); strings.HasPrefix(v, "per-node-scale-") {
				_ = s.copiesAs("").Delete(ctx, c.GetName(), metav1.DeleteOptions{})
			}
		}
	}
}
