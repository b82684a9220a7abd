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
	"syscall"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/node"
	"liken.sh/per-node/driver/internal/reclaim"
	"liken.sh/per-node/driver/internal/registration"
	"liken.sh/per-node/driver/internal/rpcserver"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type options struct {
	endpoint        string
	nodeID          string
	root            string
	registrationDir string
	healthAddress   string
	kubeconfig      string
}

func main() {
	klog.InitFlags(nil)
	var o options
	flag.StringVar(&o.endpoint, "endpoint", "unix:///var/lib/kubelet/plugins/per-node.liken.sh/csi.sock", "CSI endpoint (unix socket)")
	flag.StringVar(&o.nodeID, "node-id", "", "name of this node (required)")
	flag.StringVar(&o.root, "root", "/var/lib/per-node.liken.sh", "directory that holds this node's copies")
	flag.StringVar(&o.registrationDir, "registration-dir", "/var/lib/kubelet/plugins_registry", "kubelet's plugin registration directory; empty disables registration")
	flag.StringVar(&o.healthAddress, "health-address", ":9808", "address of the /healthz endpoint; empty disables it")
	flag.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig to reach the API server; empty: in-cluster, or standalone without a cluster")
	showVersion := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *showVersion {
		fmt.Println(version)
		return
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
	socket, err := rpcserver.SocketPath(o.endpoint)
	if err != nil {
		return err
	}
	client, err := kubeClient(o.kubeconfig)
	if err != nil {
		return err
	}
	cfg := node.Config{NodeID: o.nodeID, Version: version, Root: o.root, Mounter: mounts.NewKernel()}
	if client != nil {
		cfg.Tracker = reclaim.NewTracker(client, o.nodeID, eventRecorder(ctx, client, o.nodeID))
	}
	srv, err := node.New(cfg)
	if err != nil {
		return fmt.Errorf("start node server: %w", err)
	}
	if client != nil {
		go func() {
			if err := reclaim.NewController(client, o.nodeID, srv).Run(ctx); err != nil {
				klog.ErrorS(err, "Reclaim controller stopped")
			}
		}()
	} else {
		klog.InfoS("No cluster: running standalone; copies are not recorded on PersistentVolumes")
	}
	l, err := rpcserver.Listen(socket)
	if err != nil {
		return err
	}
	g := rpcserver.New()
	csi.RegisterIdentityServer(g, srv)
	csi.RegisterNodeServer(g, srv)
	go func() {
		if err := g.Serve(l); err != nil {
			klog.ErrorS(err, "CSI server stopped")
		}
	}()
	klog.InfoS("Serving CSI", "driver", node.DriverName, "version", version, "endpoint", socket, "node", o.nodeID)

	if o.registrationDir != "" {
		regPath := registration.SocketPath(o.registrationDir, node.DriverName)
		reg, _, err := registration.New(node.DriverName, socket).Serve(regPath)
		if err != nil {
			return err
		}
		defer func() {
			reg.Stop()
			_ = os.Remove(regPath)
		}()
	}
	if o.healthAddress != "" {
		h := &http.Server{Addr: o.healthAddress, Handler: healthz(socket), ReadHeaderTimeout: 5 * time.Second}
		go func() {
			if err := h.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				klog.ErrorS(err, "Health server stopped")
			}
		}()
		defer func() { _ = h.Close() }()
	}
	<-ctx.Done()
	klog.InfoS("Shutting down; mounted copies stay mounted")
	g.GracefulStop()
	_ = os.Remove(socket)
	return nil
}

// healthz answers 200 while the CSI socket accepts connections.
func healthz(socket string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		c, err := net.DialTimeout("unix", socket, time.Second)
		if err != nil {
			http.Error(w, "CSI socket: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_ = c.Close()
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// kubeClient connects to the API server: with kubeconfig if given, else
// in-cluster. Outside a cluster with no kubeconfig it returns nil: the
// driver runs standalone (csi-sanity, development).
func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("connect to the API server: %w", err)
	}
	return kubernetes.NewForConfig(cfg)
}

// eventRecorder records events on PersistentVolumes as this node's driver.
func eventRecorder(ctx context.Context, client kubernetes.Interface, nodeName string) record.EventRecorder {
	b := record.NewBroadcaster(record.WithContext(ctx))
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: reclaim.DriverName, Host: nodeName})
}
