// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package metrics holds the driver's Prometheus metrics: what its RPCs
// answered and how long they took, the mounts it refused, the copies on this
// node, their removal, the reclaim queue and the API requests it made (how
// many, how long the API server took to answer, how long each waited in the
// driver's own rate limit).
//
// Every series is bounded: labels are RPC methods, status codes, refusal and
// removal reasons, and (for the size of a copy) the volumes this node holds
// a copy of, read at scrape time so that a copy's series goes with it.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/cache"
	clientmetrics "k8s.io/client-go/tools/metrics"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

const namespace = "per_node"

// Refusal reasons.
const (
	// RefusedHeld: another pod on this node holds the copy.
	RefusedHeld = "held"
	// RefusedDeleting: the PersistentVolume is being deleted.
	RefusedDeleting = "deleting"
	// RefusedNotOurs: the PersistentVolume is not a per-node volume of this name.
	RefusedNotOurs = "not_ours"
)

// Removal reasons.
const (
	// RemovedDeleted: the PersistentVolume was deleted through its records.
	RemovedDeleted = "deleted"
	// RemovedOrphan: the PersistentVolume went without this node's record,
	// or was created again under the same name.
	RemovedOrphan = "orphan"
)

// Metrics is the driver's registry and the instruments the code updates. A
// nil *Metrics records nothing, so tests and tools need not build one.
type Metrics struct {
	registry     *prometheus.Registry
	rpcs         *prometheus.HistogramVec
	refusals     *prometheus.CounterVec
	removals     *prometheus.CounterVec
	removedBytes prometheus.Counter
	unmeasured   *prometheus.CounterVec
	api          *prometheus.CounterVec
	apiLatency   *prometheus.HistogramVec
	apiWait      *prometheus.HistogramVec
	received     *prometheus.CounterVec
}

// New returns the driver's metrics, with the Go runtime's and the process's
// own.
func New() *Metrics {
	m := &Metrics{
		registry: prometheus.NewRegistry(),
		rpcs: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "rpc_duration_seconds",
			Help:    "CSI calls answered by this driver, by method and gRPC status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"method", "code"}),
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "mount_refusals_total",
			Help: "Publishes refused on purpose, by reason: held (another pod on this node holds the copy), deleting (the PersistentVolume is being deleted), not_ours.",
		}, []string{"reason"}),
		removals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "copy_removals_total",
			Help: "Copies this node removed, by reason: deleted (their PersistentVolume was deleted), orphan (it went without this node's record, or was replaced).",
		}, []string{"reason"}),
		removedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "removed_bytes_total",
			Help: "Bytes of removed copies freed from this node's disk.",
		}),
		unmeasured: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "copy_measurements_abandoned_total",
			Help: "Measurements of a copy that gave up, by reason: too_deep (deeper than the walk goes), too_many_entries (--measure-max-entries), too_slow (--measure-timeout).",
		}, []string{"reason"}),
		api: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "api_requests_total",
			Help: "Requests this driver made to the Kubernetes API server, by verb and HTTP status code (\"<error>\" when no answer came).",
		}, []string{"verb", "code"}),
		apiLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "api_request_duration_seconds",
			Help:    "Time from sending a request to the Kubernetes API server to its answer, by verb.",
			Buckets: apiBuckets,
		}, []string{"verb"}),
		apiWait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "api_client_wait_seconds",
			Help:    "Time a request waited in this driver's own client-side rate limit before it was sent, by verb.",
			Buckets: apiBuckets,
		}, []string{"verb"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "api_objects_received_total",
			Help: "Objects this driver's watches delivered (each object of a list, and each change), by resource: what the cluster sends this node, whatever it holds.",
		}, []string{"resource"}),
	}
	m.registry.MustRegister(m.rpcs, m.refusals, m.removals, m.removedBytes, m.unmeasured, m.api, m.apiLatency, m.apiWait, m.received,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// BuildInfo registers per_node_build_info, always 1, labelled with the
// driver's version, the VCS revision it was built from ("unknown" when the
// build recorded none) and the Go version.
func (m *Metrics) BuildInfo(version string) {
	if m == nil {
		return
	}
	revision := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				revision = s.Value
			}
		}
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info",
		Help:        "Always 1: the driver's version, the revision it was built from and its Go version.",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "go_version": runtime.Version()},
	})
	g.Set(1)
	m.registry.MustRegister(g)
}

// Handler serves the registry in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorLog: errorLog{}})
}

// Register adds a collector (the node's copies, the reclaim controller's
// records).
func (m *Metrics) Register(c prometheus.Collector) {
	if m != nil {
		m.registry.MustRegister(c)
	}
}

// RPC counts one answered CSI call.
func (m *Metrics) RPC(method, code string, took time.Duration) {
	if m != nil {
		m.rpcs.WithLabelValues(method, code).Observe(took.Seconds())
	}
}

// Refused counts a publish refused on purpose.
func (m *Metrics) Refused(reason string) {
	if m != nil {
		m.refusals.WithLabelValues(reason).Inc()
	}
}

// Removed counts a copy this node removed.
func (m *Metrics) Removed(reason string) {
	if m != nil {
		m.removals.WithLabelValues(reason).Inc()
	}
}

// Abandoned counts a measurement of a copy that gave up.
func (m *Metrics) Abandoned(reason string) {
	if m != nil {
		m.unmeasured.WithLabelValues(reason).Inc()
	}
}

// Freed counts the bytes a removed copy gave back.
func (m *Metrics) Freed(bytes int64) {
	if m != nil && bytes > 0 {
		m.removedBytes.Add(float64(bytes))
	}
}

// Receiving returns an informer's event handler that counts, under
// resource, every object the informer's list and watch deliver. A resync
// (the informer handing its cache over again) is not counted: it costs the
// API server nothing.
func (m *Metrics) Receiving(resource string) cache.ResourceEventHandler {
	count := func() {
		if m != nil {
			m.received.WithLabelValues(resource).Inc()
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { count() },
		UpdateFunc: func(old, new any) {
			o, err1 := meta.Accessor(old)
			n, err2 := meta.Accessor(new)
			if err1 == nil && err2 == nil && o.GetResourceVersion() == n.GetResourceVersion() {
				return
			}
			count()
		},
		DeleteFunc: func(any) { count() },
	}
}

// ForClientGo makes client-go count every API request in m, and workqueues
// report their depth, adds and retries to m. client-go takes the first
// registration of the process; call it once, from main.
func (m *Metrics) ForClientGo() {
	clientmetrics.Register(clientmetrics.RegisterOpts{RequestResult: requestResult{m.api},
		RequestLatency: latency{m.apiLatency}, RateLimiterLatency: latency{m.apiWait}})
	workqueue.SetProvider(queueMetrics{m.registry})
}

type requestResult struct{ c *prometheus.CounterVec }

func (r requestResult) Increment(_ context.Context, code, method, _ string) {
	r.c.WithLabelValues(method, code).Inc()
}

// apiBuckets span an answer from a near API server (1 ms) to a timeout.
var apiBuckets = prometheus.ExponentialBuckets(0.001, 2, 15)

type latency struct{ h *prometheus.HistogramVec }

func (l latency) Observe(_ context.Context, verb string, _ url.URL, took time.Duration) {
	l.h.WithLabelValues(verb).Observe(took.Seconds())
}

// queueMetrics gives a named workqueue its series (per_node_workqueue_*).
type queueMetrics struct{ r *prometheus.Registry }

func (q queueMetrics) gauge(metric, help string) *prometheus.GaugeVec {
	return register(q.r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: metric, Help: help}, []string{"name"}))
}

func (q queueMetrics) counter(metric, help string) *prometheus.CounterVec {
	return register(q.r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: metric, Help: help}, []string{"name"}))
}

func (q queueMetrics) histogram(metric, help string) *prometheus.HistogramVec {
	return register(q.r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: namespace, Subsystem: "workqueue", Name: metric, Help: help,
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"name"}))
}

// register registers c, or returns the collector already registered under
// its name (a second queue shares it).
func register[C prometheus.Collector](r *prometheus.Registry, c C) C {
	err := r.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing
		}
	}
	if err != nil {
		panic(err) // a programming error: two metrics of one name and different kinds
	}
	return c
}

func (q queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.gauge("depth", "Volumes waiting in the reclaim queue.").WithLabelValues(name)
}

func (q queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.counter("adds_total", "Volumes added to the reclaim queue.").WithLabelValues(name)
}

func (q queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.histogram("queue_duration_seconds", "How long a volume waited in the queue.").WithLabelValues(name)
}

func (q queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.histogram("work_duration_seconds", "How long handling a volume took.").WithLabelValues(name)
}

func (q queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.gauge("unfinished_work_seconds", "Seconds of work in progress not yet done.").WithLabelValues(name)
}

func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.gauge("longest_running_processor_seconds", "Seconds the longest running handler has run.").WithLabelValues(name)
}

func (q queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.counter("retries_total", "Volumes retried (a copy still held, the API not answering).").WithLabelValues(name)
}

// errorLog sends promhttp's errors to klog.
type errorLog struct{}

func (errorLog) Println(v ...any) { klog.ErrorS(nil, "Serving metrics", "error", fmt.Sprint(v...)) }

// Gatherer is the registry, for tests and tools that read the metrics.
func (m *Metrics) Gatherer() prometheus.Gatherer { return m.registry }
