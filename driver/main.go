// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Command per-node is the node plugin of the per-node.liken.sh CSI driver:
// every node keeps its own copy of a volume, mounts it into one pod at a
// time, and keeps it after the pod leaves.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/flowcontrol"
	logsapi "k8s.io/component-base/logs/api/v1"
	_ "k8s.io/component-base/logs/json/register" // --logging-format=json
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/copylabels"
	"liken.sh/per-node/driver/internal/healthserver"
	"liken.sh/per-node/driver/internal/kube"
	"liken.sh/per-node/driver/internal/metrics"
	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/node"
	"liken.sh/per-node/driver/internal/reclaim"
	"liken.sh/per-node/driver/internal/registration"
	"liken.sh/per-node/driver/internal/rootlock"
	"liken.sh/per-node/driver/internal/rpcserver"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type options struct {
	endpoint          string
	nodeID            string
	root              string
	registrationDir   string
	healthAddress     string
	kubeconfig        string
	namespace         string
	standalone        bool
	kubeletDir        string
	statsTTL          time.Duration
	measureTimeout    time.Duration
	measureMaxEntries int64
	// rootMustBeMountPoint: wait, touching nothing, until root is a mount point.
	rootMustBeMountPoint bool
	// copyLabels: label this node's Node with the copies it holds.
	copyLabels bool
	// forgetGoneAfter: how long a recorded node's Node has been missing
	// before its record goes from a live PV.
	forgetGoneAfter time.Duration
	// limits are the client-side rate limits of each kind of API request.
	limits apiLimits
}

// rateLimit is a client-side limit: requests per second, and bursts.
type rateLimit struct {
	qps   float64
	burst int
}

// apiLimits are the driver's rate limits, one per kind of request, so that
// one kind never delays another (docs/operating.md says why each default).
type apiLimits struct {
	mounts, removals, events, nodes rateLimit
}

// limitKind is one kind of request with a limit of its own: its name in the
// flags, what it is, its limit in l and the default.
type limitKind struct {
	name, what string
	r          *rateLimit
	def        rateLimit
}

func (l *apiLimits) kinds() []limitKind {
	return []limitKind{
		{"mounts", "a publish's record of this node on the PersistentVolume", &l.mounts, rateLimit{20, 40}},
		{"removals", "the reclaim controller: removals, restored and dropped records", &l.removals, rateLimit{10, 20}},
		{"events", "events on PersistentVolumes", &l.events, rateLimit{5, 10}},
		{"nodes", "the Node watches and this node's copy labels", &l.nodes, rateLimit{5, 10}},
	}
}

// check refuses a limit that would be no limit or no requests.
func (l *apiLimits) check() error {
	for _, k := range l.kinds() {
		if k.r.qps <= 0 || k.r.burst < 1 {
			return fmt.Errorf("--api-qps-%s must be > 0 and --api-burst-%s >= 1 (got %v and %d)", k.name, k.name, k.r.qps, k.r.burst)
		}
	}
	return nil
}

// registerFlags defines the driver's own flags on fs (klog's and the
// logging format's are added beside them) and returns --version's.
// docs/operating.md's flags table is generated from them.
func registerFlags(fs *flag.FlagSet, o *options) *bool {
	fs.StringVar(&o.endpoint, "endpoint", "unix:///var/lib/kubelet/plugins/per-node.liken.sh/csi.sock", "CSI endpoint (unix socket)")
	fs.StringVar(&o.nodeID, "node-id", "", "name of this node (required)")
	fs.StringVar(&o.root, "root", "/var/lib/per-node.liken.sh", "directory that holds this node's copies")
	fs.StringVar(&o.registrationDir, "registration-dir", "/var/lib/kubelet/plugins_registry", "kubelet's plugin registration directory; empty disables registration")
	fs.StringVar(&o.healthAddress, "health-address", ":9808", "address of the /healthz, /readyz and /metrics endpoints; empty disables them")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server; empty: in-cluster")
	fs.StringVar(&o.namespace, "namespace", os.Getenv("POD_NAMESPACE"), "the driver's namespace, where the drivers choose their janitor (the Lease "+reclaim.JanitorLease+"); default $POD_NAMESPACE, else the in-cluster service account's, else "+defaultNamespace)
	fs.StringVar(&o.kubeletDir, "kubelet-dir", "/var/lib/kubelet", "kubelet's root directory: every target path must lie under its pods directory; empty disables the check")
	fs.DurationVar(&o.statsTTL, "stats-ttl", node.DefaultStatsTTL, "how long a copy's measured usage (NodeGetVolumeStats) is reused; a walk of a large copy is expensive")
	fs.DurationVar(&o.measureTimeout, "measure-timeout", node.DefaultMeasureTimeout, "the longest one measurement of a copy takes before it gives up (the copy is then reported as not measured until --stats-ttl has passed)")
	fs.Int64Var(&o.measureMaxEntries, "measure-max-entries", node.DefaultMeasureMaxEntries, "the most directory entries one measurement of a copy reads before it gives up")
	fs.BoolVar(&o.standalone, "standalone", false, "run without a cluster: copies are not recorded on PersistentVolumes and never removed (development, csi-sanity)")
	fs.BoolVar(&o.rootMustBeMountPoint, "copies-root-must-be-mount-point", false, "wait, not ready and touching nothing under --root, until --root is a mount point (copies on a filesystem of their own, which may mount after the driver starts)")
	for _, k := range o.limits.kinds() {
		fs.Float64Var(&k.r.qps, "api-qps-"+k.name, k.def.qps, "requests per second to the API server for "+k.what)
		fs.IntVar(&k.r.burst, "api-burst-"+k.name, k.def.burst, "bursts of requests to the API server for "+k.what)
	}
	fs.BoolVar(&o.copyLabels, "copy-labels", true, "label this node's Node copy.per-node.liken.sh/<pv-name> for each volume it holds a copy of, so that pods can prefer nodes that hold their data")
	fs.DurationVar(&o.forgetGoneAfter, "forget-gone-nodes-after", reclaim.DefaultForgetGoneAfter, "how long a node's Node object has been missing before a record of it that no Node owns (written by hand or by a restore) goes from a live PersistentVolume this node holds (the driver's own records are owned by their Node and go with it); 0 keeps such records until the PV is deleted")
	return fs.Bool("version", false, "print the version and exit")
}

func main() {
	logs := logsapi.NewLoggingConfiguration()
	logsapi.AddGoFlags(logs, flag.CommandLine) // -v, --vmodule, --logging-format=text|json
	var o options
	showVersion := registerFlags(flag.CommandLine, &o)
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
	}
	if err := logsapi.ValidateAndApply(logs, nil); err != nil {
		fmt.Fprintln(os.Stderr, "per-node:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		klog.ErrorS(err, "per-node stopped")
		klog.Flush()
		os.Exit(1)
	}
	klog.Flush()
}

// run serves until ctx ends. Stopping never unmounts a pod's copy: kubelet
// owns every mount this driver made.
func run(ctx context.Context, o options) error {
	if o.nodeID == "" {
		return errors.New("--node-id is required (the Kubernetes node name)")
	}
	if err := o.limits.check(); err != nil {
		return err
	}
	if o.forgetGoneAfter < 0 {
		return fmt.Errorf("--forget-gone-nodes-after must be 0 (never) or a duration > 0, not %v", o.forgetGoneAfter)
	}
	socket, err := rpcserver.SocketPath(o.endpoint)
	if err != nil {
		return err
	}
	if o.rootMustBeMountPoint {
		if err := waitForRootMount(ctx, mounts.NewKernel(), o.root, o.healthAddress, 2*time.Second); err != nil {
			return fmt.Errorf("waiting for the copies root %s to be a mount point: %w", o.root, err)
		}
	}
	lock, err := rootlock.Acquire(o.root)
	if err != nil {
		return err
	}
	defer func() { _ = lock.Release() }()
	var c clients
	if !o.standalone {
		if c, err = kubeClients(o.kubeconfig, o.namespace, o.limits); err != nil {
			return err
		}
	}
	m := metrics.New()
	m.BuildInfo(version)
	m.ForClientGo()
	cfg := node.Config{NodeID: o.nodeID, Version: version, Root: o.root, Mounter: mounts.NewKernel(),
		KubeletDir: o.kubeletDir, StatsTTL: o.statsTTL, Metrics: m,
		MeasureTimeout: o.measureTimeout, MeasureMaxEntries: o.measureMaxEntries}
	var tracker *reclaim.Tracker
	if !o.standalone {
		tracker = reclaim.NewTracker(c.publish, c.publishCopies, o.nodeID, eventRecorder(ctx, c.events, o.nodeID))
		cfg.Tracker = tracker
	}
	srv, err := node.New(cfg)
	if err != nil {
		return fmt.Errorf("start node server: %w", err)
	}
	reclaimDone := make(chan struct{}) // closed once the controller's Run returned (never in --standalone)
	if !o.standalone && o.copyLabels {
		labels := copylabels.New(c.meta, o.nodeID, srv, m)
		srv.OnCopiesChanged(labels.Changed)
		go func() {
			if err := labels.Run(ctx); err != nil {
				klog.ErrorS(err, "Copy labels stopped")
			}
		}()
	}
	if !o.standalone {
		ctl, err := reclaim.NewController(c.reclaim, c.reclaimCopies, c.meta, o.nodeID, srv, m)
		if err != nil {
			return fmt.Errorf("start the reclaim controller: %w", err)
		}
		ctl.ForgetGoneAfter(o.forgetGoneAfter)
		ctl.ElectJanitor(c.leases)
		tracker.Consult(ctl) // a publish reads the PV from the controller's cache
		go func() {
			defer close(reclaimDone)
			if err := ctl.Run(ctx); err != nil {
				klog.ErrorS(err, "Reclaim controller stopped")
			}
		}()
	} else {
		klog.InfoS("Standalone: copies are not recorded on PersistentVolumes and never removed")
	}
	l, err := rpcserver.Listen(socket)
	if err != nil {
		return err
	}
	g := rpcserver.New(m)
	csi.RegisterIdentityServer(g, srv)
	csi.RegisterNodeServer(g, srv)
	go func() {
		if err := g.Serve(l); err != nil {
			klog.ErrorS(err, "CSI server stopped")
		}
	}()
	klog.InfoS("Serving CSI", "driver", node.DriverName, "version", version, "endpoint", socket, "node", o.nodeID)

	checks := []check{{"CSI socket", func() error { return dial(socket) }}}
	var ready []check // what /readyz adds: this node can mount
	if o.registrationDir != "" {
		regPath := registration.SocketPath(o.registrationDir, node.DriverName)
		regSrv := registration.New(node.DriverName, socket)
		reg, _, err := regSrv.Serve(regPath)
		if err != nil {
			return err
		}
		defer func() {
			reg.Stop()
			_ = os.Remove(regPath)
		}()
		checks = append(checks, check{"kubelet registration", func() error {
			if regSrv.Refused() {
				return errors.New("kubelet refused the driver")
			}
			return dial(regPath)
		}})
		ready = append(ready, check{"kubelet registration accepted", func() error {
			if !regSrv.Registered() {
				return errors.New("kubelet has not registered the driver yet")
			}
			return nil
		}})
	}
	if !o.standalone {
		checks = append(checks, check{"reclaim controller", func() error {
			select {
			case <-reclaimDone:
				return errors.New("stopped")
			default:
				return nil
			}
		}})
	}
	if o.healthAddress != "" {
		h := healthserver.New(o.healthAddress, endpoints(checks, ready, m.Handler()))
		healthserver.Start(h)
		defer func() { _ = h.Close() }()
	}
	<-ctx.Done()
	klog.InfoS("Shutting down; mounted copies stay mounted")
	srv.Stop()
	g.GracefulStop()
	_ = os.Remove(socket)
	// The controller gives the janitor's Lease up as it stops, so that
	// another driver takes it at its next try rather than once it expires;
	// within the pod's grace period.
	if !o.standalone {
		select {
		case <-reclaimDone:
		case <-time.After(shutdownWait):
			klog.InfoS("The reclaim controller did not stop in time; exiting", "waited", shutdownWait)
		}
	}
	return nil
}

// shutdownWait is how long a stopping driver waits for its reclaim
// controller (the pod's grace period is 10 s).
const shutdownWait = 5 * time.Second

// check is one thing /healthz verifies.
type check struct {
	name string
	err  func() error
}

// endpoints serves /healthz, 200 while every check passes, and /readyz, 200
// while every check and every ready check passes, else 503 naming the first
// that failed; and /metrics.
func endpoints(checks, ready []check, metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.Handle("/healthz", answer(checks))
	mux.Handle("/readyz", answer(append(append([]check{}, checks...), ready...)))
	return mux
}

func answer(checks []check) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for _, c := range checks {
			if err := c.err(); err != nil {
				http.Error(w, c.name+": "+err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		_, _ = w.Write([]byte("ok\n"))
	}
}

// dial checks that a unix socket accepts connections.
func dial(socket string) error {
	c, err := net.DialTimeout("unix", socket, time.Second)
	if err != nil {
		return err
	}
	return c.Close()
}

// clients are the driver's connections to the API server, each with its
// own rate limit, so that a burst of events or of reclaim work never delays
// the record a publish waits for.
type clients struct {
	publish       kube.PersistentVolumes // NodePublishVolume's record of this node
	publishCopies kube.Copies            // the same, with the same rate limit
	reclaim       kube.PersistentVolumes // the reclaim controller: watches, and patches when it acts
	reclaimCopies kube.Copies            // the same, with the same rate limit
	events        record.EventSink       // events on PersistentVolumes
	meta          metadata.Interface     // Nodes, watched as metadata only
	leases        kube.Leases            // the janitor's Lease, in the driver's namespace
}

// kubeClients connects to the API server: with kubeconfig if given, else
// in-cluster. Missing credentials are an error: running without a cluster
// is --standalone, never a fallback.
func kubeClients(kubeconfig, namespace string, limits apiLimits) (clients, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return clients{}, fmt.Errorf("connect to the API server (use --standalone to run without a cluster): %w", err)
	}
	cfg.UserAgent = "per-node/" + version
	with := func(l rateLimit) *rest.Config {
		c := rest.CopyConfig(cfg)
		c.QPS, c.Burst = float32(l.qps), l.burst
		c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(c.QPS, c.Burst) // one per use, whatever the resource
		return c
	}
	var c clients
	mounts, removals := with(limits.mounts), with(limits.removals)
	if c.publish, err = kube.NewPersistentVolumes(mounts); err != nil {
		return clients{}, err
	}
	if c.publishCopies, err = kube.NewCopies(mounts); err != nil {
		return clients{}, err
	}
	if c.reclaim, err = kube.NewPersistentVolumes(removals); err != nil {
		return clients{}, err
	}
	if c.reclaimCopies, err = kube.NewCopies(removals); err != nil {
		return clients{}, err
	}
	if c.events, err = kube.NewEventSink(with(limits.events)); err != nil {
		return clients{}, err
	}
	if c.leases, err = kube.NewLeases(removals, driverNamespace(namespace)); err != nil {
		return clients{}, err
	}
	c.meta, err = metadata.NewForConfig(with(limits.nodes))
	return c, err
}

// defaultNamespace is the driver's namespace when nothing says another.
const defaultNamespace = "per-node-system"

// inClusterNamespace is the file of a pod's service account token that
// names its namespace.
const inClusterNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// driverNamespace is flag, else the in-cluster service account's
// namespace, else defaultNamespace.
func driverNamespace(flag string) string {
	if flag != "" {
		return flag
	}
	if b, err := os.ReadFile(inClusterNamespace); err == nil && len(strings.TrimSpace(string(b))) > 0 {
		return strings.TrimSpace(string(b))
	}
	return defaultNamespace
}

// eventRecorder records events on PersistentVolumes as this node's driver.
func eventRecorder(ctx context.Context, sink record.EventSink, nodeName string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(sink)
	return b.NewRecorder(kube.Scheme, corev1.EventSource{Component: reclaim.DriverName, Host: nodeName})
}
