// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

// Package node serves the CSI Identity and Node services of
// per-node.liken.sh: each node keeps its own copy of a volume, bind-mounts it
// into at most one pod at a time, and keeps it after the pod leaves.
package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"k8s.io/klog/v2"
	mountutils "k8s.io/mount-utils"

	"liken.sh/per-node/driver/internal/holders"
	"liken.sh/per-node/driver/internal/keylock"
	"liken.sh/per-node/driver/internal/layout"
	"liken.sh/per-node/driver/internal/metrics"
	"liken.sh/per-node/driver/internal/mounts"
	"liken.sh/per-node/driver/internal/tree"
)

// namesDelay is how long after a publish or unpublish the holder's name is
// saved or removed: a burst of them is written at once, after the answers.
const namesDelay = 100 * time.Millisecond

// DriverName is the CSI driver name, as written in PersistentVolumes.
const DriverName = "per-node.liken.sh"

// Config is what a Server is built from.
type Config struct {
	// NodeID is the Kubernetes node name.
	NodeID string
	// Version is reported by GetPluginInfo.
	Version string
	// Root is the directory that holds this node's copies.
	Root string
	// Mounter is the kernel (tests may wrap it).
	Mounter mounts.Mounter
	// MountInfo is the mount table read at start; empty means /proc/self/mountinfo.
	MountInfo string
	// Tracker records copies on their PersistentVolumes (nil: standalone).
	Tracker Tracker
	// StatsTTL is how long a copy's measured usage is reused (0: default;
	// negative: measure every time).
	StatsTTL time.Duration
	// MeasureTimeout and MeasureMaxEntries bound one measurement of a
	// copy (0: DefaultMeasureTimeout, DefaultMeasureMaxEntries).
	MeasureTimeout    time.Duration
	MeasureMaxEntries int64
	// KubeletDir, when set, is kubelet's root directory: every target path
	// must lie under its pods directory.
	KubeletDir string
	// Metrics counts refusals and removals, and is given the node's copies
	// to report (nil: no metrics).
	Metrics *metrics.Metrics
}

// Server implements csi.IdentityServer and csi.NodeServer.
type Server struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedNodeServer

	nodeID  string
	version string
	layout  layout.Layout
	mounter mounts.Mounter
	tracker Tracker
	// podsDir is kubelet's pods directory ("" when targets are not checked).
	podsDir string
	holders *holders.Index
	// names saves each holder's name next to its copy, off the request path.
	names   *holders.Names
	usage   *usageCache
	metrics *metrics.Metrics
	// stop ends the background work (the trash's retries) at Stop.
	stop     chan struct{}
	stopOnce sync.Once
	// trashWorkers counts the goroutines emptying trash entries.
	trashWorkers atomic.Int32
	// locks serialises work on one handle, exactly: a volume whose
	// publish waits on the API server holds up no other volume.
	locks *keylock.Locks
	// copiesChanged is called after a copy is made or moved to the trash.
	copiesChanged func()
}

// New prepares the root directory and learns, from the kernel's mount table,
// which copies are mounted and where.
func New(cfg Config) (*Server, error) {
	if cfg.NodeID == "" {
		return nil, fmt.Errorf("node id is empty")
	}
	if err := os.MkdirAll(cfg.Root, 0o750); err != nil {
		return nil, fmt.Errorf("create root: %w", err)
	}
	root, err := filepath.EvalSymlinks(cfg.Root)
	if err != nil {
		return nil, fmt.Errorf("resolve root: %w", err)
	}
	l, err := layout.New(root)
	if err != nil {
		return nil, err
	}
	for _, dir := range []string{l.VolumesDir(), l.TrashDir()} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	s := &Server{
		nodeID:  cfg.NodeID,
		version: cfg.Version,
		layout:  l,
		mounter: cfg.Mounter,
		tracker: cfg.Tracker,
		holders: holders.NewIndex(),
		podsDir: podsDir(cfg.KubeletDir),
		usage:   newUsageCache(statsTTL(cfg.StatsTTL)),
		locks:   &keylock.Locks{},
		metrics: cfg.Metrics,
		stop:    make(chan struct{}),
	}
	if cfg.MountInfo == "" {
		cfg.MountInfo = mounts.ProcSelfMountInfo
	}
	if err := s.seedHolders(cfg.MountInfo); err != nil {
		return nil, err
	}
	s.names = holders.NewNames(s.holders, s.holderFile)
	go s.names.Run(s.stop, namesDelay)
	s.usage.measure, s.usage.gaveUp = measureWithin(cfg), s.gaveUp
	cfg.Metrics.Register(copiesCollector{s})
	return s, nil
}

func statsTTL(ttl time.Duration) time.Duration {
	if ttl == 0 {
		return DefaultStatsTTL
	}
	return max(ttl, 0)
}

// measureWithin measures a copy within the limits cfg sets.
func measureWithin(cfg Config) func(dir string) (tree.Used, error) {
	lim := tree.Limits{Time: cfg.MeasureTimeout, Entries: cfg.MeasureMaxEntries}
	if lim.Time == 0 {
		lim.Time = DefaultMeasureTimeout
	}
	if lim.Entries == 0 {
		lim.Entries = DefaultMeasureMaxEntries
	}
	return func(dir string) (tree.Used, error) { return usageWithin(dir, lim) }
}

// gaveUp tells that a copy's measurement gave up: a metric by reason, an
// event on its PV, a log line.
func (s *Server) gaveUp(handle string, err *tree.LimitError) {
	klog.InfoS("Gave up measuring a copy; it is reported as not measured until its next measurement", "volume_id", handle, "reason", err.Reason, "limit", err.Limit)
	s.metrics.Abandoned(err.Reason)
	if s.tracker != nil {
		s.tracker.Event(context.Background(), handle, s.boundUID(handle), "Warning", "CopyNotMeasured", fmt.Sprintf(
			"node %s gave up measuring its copy (%s, limit %s): its usage is not reported until a measurement fits; see docs/operating.md",
			s.nodeID, err.Reason, err.Limit))
	}
}

// boundUID is the UID of the PV the copy of handle is bound to ("" when
// unknown: the event then names the PV the tracker read last).
func (s *Server) boundUID(handle string) string {
	uid, _ := s.CopyUID(handle)
	return uid
}

func podsDir(kubeletDir string) string {
	if kubeletDir == "" {
		return ""
	}
	return filepath.Join(filepath.Clean(kubeletDir), "pods")
}

// seedHolders records every copy that the kernel shows mounted.
func (s *Server) seedHolders(mountInfo string) error {
	handles, err := s.Handles()
	if err != nil {
		return err
	}
	byDir := map[string]string{}
	dirs := make([]string, 0, len(handles))
	for _, h := range handles {
		dir, _ := s.layout.CopyDir(h)
		byDir[dir] = h
		dirs = append(dirs, dir)
	}
	table, err := mountutils.ParseMountInfo(mountInfo)
	if err != nil {
		return fmt.Errorf("read mount table: %w", err)
	}
	held := mounts.BindTargets(table, dirs)
	for dir, handle := range byDir {
		if _, ok := held[dir]; !ok { // unmounted while no driver ran
			if err := holders.Remove(s.holderFile(handle)); err != nil {
				klog.ErrorS(err, "Cannot remove a former holder's name", "volume_id", handle)
			}
		}
	}
	for dir, targets := range held {
		handle := byDir[dir]
		if len(targets) > 1 {
			klog.InfoS("Copy is mounted at more than one target; the first is taken as its holder",
				"volume_id", handle, "targets", targets)
		}
		h := holders.Load(s.holderFile(handle), targets[0], holders.PodName(nil, targets[0]))
		s.holders.Set(handle, h)
		klog.InfoS("Found a mounted copy", "volume_id", handle, "target_path", h.Target, "pod", h.Pod)
	}
	klog.InfoS("Node server ready", "root", s.layout.Root(), "copies", len(handles), "held", s.holders.Len())
	return nil
}

// Handles lists the volumes this node holds a copy of.
func (s *Server) Handles() ([]string, error) {
	entries, err := os.ReadDir(s.layout.VolumesDir())
	if err != nil {
		return nil, fmt.Errorf("list copies: %w", err)
	}
	var out []string
	for _, e := range entries {
		if e.IsDir() && layout.Validate(e.Name()) == nil {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// OnCopiesChanged sets f to be called after a copy is made or moved to the
// trash (the node's copy labels follow). Call it before serving.
func (s *Server) OnCopiesChanged(f func()) { s.copiesChanged = f }

func (s *Server) notifyCopies() {
	if s.copiesChanged != nil {
		s.copiesChanged()
	}
}

// Stop ends the server's background work: trash entries still being
// retried are left for the next start (EmptyTrash); holders' names due are
// written now. Mounts stay.
func (s *Server) Stop() {
	s.stopOnce.Do(func() { close(s.stop) })
	s.names.Flush()
}
