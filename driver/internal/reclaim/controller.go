// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package reclaim

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"liken.sh/per-node/driver/internal/copyapi"
	"liken.sh/per-node/driver/internal/kube"
	"liken.sh/per-node/driver/internal/metrics"
)

// resync re-examines every watched PV from its cache (no API call) as a
// safety net; events and the retry queue do the real work.
const resync = 10 * time.Minute

// workers is how many handles the controller works on at once (the queue
// never gives one handle to two). A removal waits for the API server to
// drop this node's record, so one worker would remove one copy per round
// trip; the reclaim client's rate limit, not the workers, bounds the load.
const workers = 4

var nodesResource = corev1.SchemeGroupVersion.WithResource("nodes")

// errOwnNodeAbsent delays re-recording while this node's Node object is
// missing (deleted, not yet re-registered): the other nodes would drop the
// record again at once.
// ErrCopyChanged: the copy on disk is bound to another PV UID than the one
// a removal was decided for (the PV was created again and a pod of it made
// a new copy meanwhile). The removal is not made.
var ErrCopyChanged = errors.New("the copy changed since its removal was decided")

var errOwnNodeAbsent = errors.New("this node's Node object is absent; its records are restored once it registers again")

// Copies is this node's side: the copies on disk.
type Copies interface {
	// Handles lists the volumes this node holds a copy of.
	Handles() ([]string, error)
	// HasCopy reports whether this node holds a copy of handle.
	HasCopy(handle string) (bool, error)
	// CopyUID is the UID of the PV a copy is bound to ("" if unbound).
	CopyUID(handle string) (string, error)
	// RemoveCopy removes the copy of handle bound to PV UID uid ("" for
	// none) unless a pod on this node holds it (or the kernel cannot tell);
	// a copy bound to another UID is refused with ErrCopyChanged.
	RemoveCopy(handle, uid string) (bool, error)
	// EmptyTrash removes copies a crash left half-removed.
	EmptyTrash() error
}

// Controller removes this node's copies of deleted PersistentVolumes,
// restores this node's records where they vanished, and drops the records
// of Nodes that are gone.
type Controller struct {
	client  kube.PersistentVolumes
	copies  kube.Copies
	meta    metadata.Interface
	node    string
	disk    Copies
	tracker *Tracker
	queue   workqueue.TypedRateLimitingInterface[string]
	// watches watches the PVs this node holds a copy or a Copy of; held
	// is where they are read (watches, or a fixed set in tests).
	watches *heldPVs
	held    pvView
	nodes   cache.GenericLister
	// own is this node's Copies, indexed by volume.
	own     cache.Indexer
	metrics *metrics.Metrics
	// gone times the records of missing nodes on the live PVs this node
	// holds.
	gone *goneClock
	// nodeInformer and copyInformer are made with the controller and
	// started by Run: publish reads their caches (through the Tracker) from
	// the moment the controller exists, so no field it reads is written
	// after NewController returns.
	nodeInformer, copyInformer cache.SharedIndexInformer
	// synced is set once the caches have synced.
	synced atomic.Bool
	// leases hold the Lease the janitor is chosen by (nil: never the
	// janitor), janitorTiming how.
	leases        kube.Leases
	janitorTiming janitorTiming
}

// NewController returns the controller of node, its informers made (Run
// starts them). meta watches Nodes as metadata only. m (may be nil) counts
// removals, and is given the records this node holds to report.
func NewController(client kube.PersistentVolumes, copyClient kube.Copies, meta metadata.Interface, node string, copies Copies, m *metrics.Metrics) (*Controller, error) {
	c := &Controller{client: client, copies: copyClient, meta: meta, node: node, disk: copies, metrics: m,
		tracker: NewTracker(client, copyClient, node, nil), gone: newGoneClock(DefaultForgetGoneAfter),
		watches: newHeldPVs(client, resync), janitorTiming: defaultJanitorTiming,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			// A copy held by a pod is retried at most 10 s apart, so it goes
			// soon after the pod; retries of a held copy cost no API call.
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 10*time.Second),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "reclaim"})}
	c.held = c.watches
	c.tracker.owner = c.OwnNodeUID
	onPV := func(obj any) {
		if name := objectName(obj); name != "" {
			c.queue.Add(name)
		}
	}
	c.watches.handlers = []cache.ResourceEventHandler{c.metrics.Receiving("persistentvolumes"), cache.ResourceEventHandlerFuncs{
		AddFunc: onPV, UpdateFunc: func(_, n any) { onPV(n) }, DeleteFunc: onPV, // a copy whose PV went without our record
	}}
	var err error
	if c.nodeInformer, err = c.ownNode(); err != nil {
		return nil, err
	}
	if c.copyInformer, err = c.ownCopies(); err != nil {
		return nil, err
	}
	m.Register(recordsCollector{c})
	return c, nil
}

// ownNode is the informer of this node's own Node only: whether it is
// registered decides re-recording. Other Nodes are asked about, only when
// a PV being deleted records them (forgetGoneNodes): a watch of every Node
// would send every kubelet's status report to every driver, N² at rest.
func (c *Controller) ownNode() (cache.SharedIndexInformer, error) {
	inf := kube.MetadataInformer(c.meta, nodesResource, resync, func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + c.node
	})
	if err := inf.SetTransform(lean); err != nil {
		return nil, err
	}
	c.nodes = cache.NewGenericLister(inf.GetIndexer(), nodesResource.GroupResource())
	if _, err := inf.AddEventHandler(c.metrics.Receiving("nodes")); err != nil {
		return nil, err
	}
	_, err := inf.AddEventHandler(c.nodeEvents())
	return inf, err
}

// DefaultForgetGoneAfter is how long a node's Node object has been missing
// before its record goes from a live PV (docs/operating.md says why).
const DefaultForgetGoneAfter = time.Hour

// ForgetGoneAfter sets how long a recorded node's Node object has been
// missing before its record goes from a live PV this node holds; 0 never
// drops one (a PV being deleted drops them at once, whatever this is).
func (c *Controller) ForgetGoneAfter(d time.Duration) { c.gone = newGoneClock(d) }

// Run reconciles until ctx ends. It returns an error if its caches never
// sync.
func (c *Controller) Run(ctx context.Context) error {
	c.watches.start(ctx)
	defer c.watches.wait()
	stop, err := kube.Start(ctx, c.nodeInformer, c.copyInformer)
	defer stop()
	if err != nil {
		return fmt.Errorf("watch this node's Node and Copies: %w", err)
	}
	c.synced.Store(true)
	if err := c.queueLocal(); err != nil {
		return err
	}
	for _, v := range c.own.ListIndexFuncValues(byVolume) {
		c.queue.Add(v)
	}
	if c.leases != nil {
		campaigned := make(chan struct{})
		go func() {
			defer close(campaigned)
			c.campaign(ctx)
		}()
		defer func() { <-campaigned }() // the Lease given up before Run returns
	}
	go c.emptyTrash(ctx)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	c.work(ctx)
	return nil
}

// byVolume indexes Copies by their volume.
const byVolume = "volume"

// ownCopies is the informer of this node's Copies (a label selects them;
// their spec decides): a change to one queues its volume.
func (c *Controller) ownCopies() (cache.SharedIndexInformer, error) {
	inf := kube.CopyInformer(c.copies, resync, copyapi.NodeSelector(c.node))
	if err := inf.AddIndexers(cache.Indexers{byVolume: func(obj any) ([]string, error) {
		if cp, ok := obj.(*copyapi.Copy); ok && cp.Spec.Node == c.node {
			return []string{cp.Spec.Volume}, nil
		}
		return nil, nil
	}}); err != nil {
		return nil, err
	}
	if err := inf.SetTransform(lean); err != nil {
		return nil, err
	}
	c.own = inf.GetIndexer()
	if _, err := inf.AddEventHandler(c.metrics.Receiving("copies")); err != nil {
		return nil, err
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: c.copyEvent, UpdateFunc: func(_, n any) { c.copyEvent(n) }, DeleteFunc: c.copyEvent})
	return inf, err
}

// copyEvent is what a change to one of this node's Copies does: it queues
// its volume, and the Tracker stops answering from what it created, since
// the view has now seen that Copy (or seen it go).
func (c *Controller) copyEvent(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cp, ok := obj.(*copyapi.Copy)
	if !ok || cp.Spec.Node != c.node {
		return
	}
	c.tracker.seenCopy(cp)
	c.queue.Add(cp.Spec.Volume)
}

// nodeEvents are what this node's Node's events do: its arrival,
// departure, and registration again under a new UID (its Copies' owner is
// gone: the collector deletes them) each queue what it holds.
func (c *Controller) nodeEvents() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.onNode(objectName(obj)) },
		UpdateFunc: func(old, obj any) {
			if uidOf(old) != uidOf(obj) {
				c.onNode(objectName(obj))
			}
		},
		DeleteFunc: func(obj any) { c.onNode(objectName(obj)) },
	}
}

// uidOf is obj's UID ("" if it has none).
func uidOf(obj any) types.UID {
	if m, err := meta.Accessor(obj); err == nil {
		return m.GetUID()
	}
	return ""
}

// OwnNodeUID is the UID of this node's Node object as the controller's
// watch of it last saw it ("" while it is absent or not seen yet).
func (c *Controller) OwnNodeUID() types.UID {
	if c.nodes == nil {
		return ""
	}
	obj, err := c.nodes.Get(c.node)
	if err != nil {
		return ""
	}
	return uidOf(obj)
}

// OwnCopy returns this node's Copy of the PV volume of UID uid as the
// informer last saw it: one owned by this node's Node if there is one (a
// Copy written by hand, or owned by the Node before it registered again,
// is replaced by one), the oldest if a retried create left two.
func (c *Controller) OwnCopy(volume, uid string) (*copyapi.Copy, bool) {
	if c.own == nil {
		return nil, false
	}
	node := c.OwnNodeUID()
	mine := func(cp *copyapi.Copy) bool { return node != "" && cp.OwnedBy(node) }
	var found *copyapi.Copy
	for _, cp := range c.ownOf(volume) {
		if cp.Spec.VolumeUID != uid {
			continue
		}
		if found == nil || mine(cp) && !mine(found) || mine(cp) == mine(found) && older(cp, found) {
			found = cp
		}
	}
	return found, c.synced.Load()
}

// ownOf is every Copy of this node of the PVs named volume, whatever their
// UID.
func (c *Controller) ownOf(volume string) []*copyapi.Copy {
	objs, _ := c.own.ByIndex(byVolume, volume)
	out := make([]*copyapi.Copy, 0, len(objs))
	for _, o := range objs {
		if cp, ok := o.(*copyapi.Copy); ok {
			out = append(out, cp)
		}
	}
	return out
}

// older says whether a was created before b (by name when at once).
func older(a, b *copyapi.Copy) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

// work runs the workers until the queue shuts down.
func (c *Controller) work(ctx context.Context) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	wg.Wait()
}

// Cached returns the PV of name as the controller's watch of it last saw
// it: only PVs this node holds are watched, and before a watch has synced
// it has seen nothing.
func (c *Controller) Cached(name string) (*corev1.PersistentVolume, bool) {
	return c.held.get(name)
}

// lean drops from an object before it is cached what the controller never
// reads: its managed fields, which on a Node (kubelet writes its status)
// are most of what a metadata-only watch holds; and of a PersistentVolume
// of another driver or none, all but othersPV keeps. Every node's driver
// watches every PV of the cluster, and most are not per-node's.
func lean(obj any) (any, error) {
	if pv, ok := obj.(*corev1.PersistentVolume); ok && !ours(pv) {
		return othersPV(pv), nil
	}
	if o, err := meta.Accessor(obj); err == nil {
		o.SetManagedFields(nil)
	}
	return obj, nil
}

// othersPV is what the controller reads of a PV that is not per-node's:
// that it is not (spec.csi's driver and handle, for CheckOurs' message),
// and what decides a copy on disk that bears its name (UID, finalizers,
// deletion).
func othersPV(pv *corev1.PersistentVolume) *corev1.PersistentVolume {
	kept := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pv.Name, UID: pv.UID,
		ResourceVersion: pv.ResourceVersion, DeletionTimestamp: pv.DeletionTimestamp, Finalizers: pv.Finalizers}}
	if csi := pv.Spec.CSI; csi != nil {
		kept.Spec.CSI = &corev1.CSIPersistentVolumeSource{Driver: csi.Driver, VolumeHandle: csi.VolumeHandle}
	}
	return kept
}

func objectName(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if o, ok := obj.(metav1.Object); ok {
		return o.GetName()
	}
	return ""
}

func ours(pv *corev1.PersistentVolume) bool {
	return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == DriverName
}

// onNode queues, when this node's Node arrives or goes, every per-node PV
// (its records may need restoring) and every copy on disk. The informer
// watches only this node's Node; anything else is ignored.
func (c *Controller) onNode(node string) {
	if node != c.node {
		return
	}
	for _, name := range c.held.names() {
		c.queue.Add(name)
	}
	_ = c.queueLocal()
}

// queueLocal queues every copy on this node's disk, whatever its PV.
func (c *Controller) queueLocal() error {
	handles, err := c.disk.Handles()
	if err != nil {
		return fmt.Errorf("list this node's copies: %w", err)
	}
	for _, h := range handles {
		c.queue.Add(h)
	}
	return nil
}

// emptyTrash empties what an earlier run left in the trash, retrying with
// backoff until it is done.
func (c *Controller) emptyTrash(ctx context.Context) {
	backoff := time.Second
	for {
		err := c.disk.EmptyTrash()
		if err == nil {
			return
		}
		klog.ErrorS(err, "Cannot empty the trash; will retry", "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Minute)
	}
}

func (c *Controller) next(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		klog.InfoS("Will retry", "volume_id", name, "reason", err.Error(), "retries", c.queue.NumRequeues(name))
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// sync brings one handle in line: this node's copy and record, and the
// records of nodes that no longer exist.
func (c *Controller) sync(ctx context.Context, name string) error {
	held, err := c.holds(name)
	if err != nil {
		return err
	}
	if !held {
		c.held.forget(name)
		c.gone.dropped(name)
		return nil
	}
	if err := c.held.watch(name); err != nil {
		return err
	}
	pv, ok := c.held.get(name)
	if !ok {
		c.gone.dropped(name)
		return c.syncUncached(ctx, name)
	}
	if ours(pv) && pv.DeletionTimestamp != nil {
		if err := c.forgetGoneNodes(ctx, pv); err != nil {
			return err
		}
	}
	if err := c.syncCopy(ctx, pv); err != nil {
		return err
	}
	return c.forgetGoneLive(ctx, pv)
}

// holds says whether this node holds a copy of name on its disk, or a
// Copy of a PV of that name: what makes its PV watched.
func (c *Controller) holds(name string) (bool, error) {
	if len(c.ownOf(name)) > 0 {
		return true, nil
	}
	return c.disk.HasCopy(name)
}

// syncUncached handles a name the cache does not know: if this node has a
// copy, a fresh read decides.
func (c *Controller) syncUncached(ctx context.Context, name string) error {
	has, err := c.disk.HasCopy(name)
	if err != nil {
		return err
	}
	if !has {
		return c.dropOrphanCopies(ctx, name)
	}
	uid, err := c.disk.CopyUID(name)
	if err != nil {
		return err
	}
	pv, err := getPVFresh(ctx, c.client, name)
	if errors.Is(err, ErrNoVolume) {
		if err := c.removeCopy(name, uid, metrics.RemovedOrphan, "its PersistentVolume no longer exists"); err != nil {
			return err
		}
		return c.dropOrphanCopies(ctx, name)
	}
	if err != nil {
		return err
	}
	return c.syncCopy(ctx, pv)
}

// syncCopy decides this node's copy of pv and its record.
func (c *Controller) syncCopy(ctx context.Context, pv *corev1.PersistentVolume) error {
	if err := c.tidyOwn(ctx, pv); err != nil {
		return err
	}
	own, _ := c.OwnCopy(pv.Name, string(pv.UID))
	has, err := c.disk.HasCopy(pv.Name)
	if err != nil {
		return err
	}
	if !has {
		if removable(pv) && own != nil {
			return c.dropOwn(ctx, pv, own)
		}
		return nil
	}
	uid, err := c.disk.CopyUID(pv.Name)
	if err != nil {
		return err
	}
	switch {
	case uid != "" && uid != string(pv.UID):
		return c.removeIfReplaced(ctx, pv.Name, uid)
	case removable(pv):
		if err := c.removeCopy(pv.Name, uid, metrics.RemovedDeleted, "its PersistentVolume is being deleted"); err != nil {
			return err
		}
		return c.dropOwn(ctx, pv, own) // no Copy: a copy that predates it; the PV may still be released
	case pv.DeletionTimestamp != nil, uid == "", own != nil && c.tracker.fits(own) && hasFinalizer(pv):
		return nil // waits for its claim; bound to no PV (the next publish replaces it); recorded
	}
	return c.rerecord(ctx, pv)
}

// dropOwn deletes this node's Copy of pv (own, if any: its copy is gone)
// and releases pv if no Copy of it is left.
func (c *Controller) dropOwn(ctx context.Context, pv *corev1.PersistentVolume, own *copyapi.Copy) error {
	if own != nil {
		dctx, cancel := context.WithTimeout(ctx, APITimeout)
		err := deleteCopy(dctx, c.copies, own)
		cancel()
		if err != nil {
			return err
		}
	}
	return release(ctx, c.client, c.copies, pv)
}

// tidyOwn deletes this node's Copies of the name of pv that no copy needs:
// a second Copy of the same PV (a create retried after its answer was
// lost), and a Copy of another UID once a fresh read shows that no PV of
// that UID exists and the copy on disk is not bound to it.
func (c *Controller) tidyOwn(ctx context.Context, pv *corev1.PersistentVolume) error {
	mine := c.ownOf(pv.Name)
	if len(mine) < 2 && (len(mine) == 0 || mine[0].Spec.VolumeUID == string(pv.UID)) {
		return nil
	}
	keep, _ := c.OwnCopy(pv.Name, string(pv.UID))
	var stale []*copyapi.Copy
	for _, cp := range mine {
		if cp != keep {
			stale = append(stale, cp)
		}
	}
	diskUID, err := c.disk.CopyUID(pv.Name)
	if err != nil {
		diskUID = "" // no copy on disk
	}
	var fresh *corev1.PersistentVolume
	for _, cp := range stale {
		if cp.Spec.VolumeUID != string(pv.UID) {
			if cp.Spec.VolumeUID == diskUID {
				continue // the copy on disk is its: removeIfReplaced decides
			}
			if fresh == nil {
				if fresh, err = getPVFresh(ctx, c.client, pv.Name); err != nil && !errors.Is(err, ErrNoVolume) {
					return err
				}
			}
			if fresh != nil && string(fresh.UID) == cp.Spec.VolumeUID {
				continue // the cache was behind
			}
		}
		dctx, cancel := context.WithTimeout(ctx, APITimeout)
		err := deleteCopy(dctx, c.copies, cp)
		cancel()
		if err != nil {
			return err
		}
		klog.InfoS("Deleted a Copy this node's copy does not need", "volume_id", pv.Name, "copy", cp.Name, "uid", cp.Spec.VolumeUID)
	}
	return nil
}

// dropOrphanCopies deletes this node's Copies of the name of a PV the cache
// does not know, and whose copy is gone from this node's disk, once a fresh
// read shows that no PV of their UID exists.
func (c *Controller) dropOrphanCopies(ctx context.Context, name string) error {
	mine := c.ownOf(name)
	if len(mine) == 0 {
		return nil
	}
	pv, err := getPVFresh(ctx, c.client, name)
	if err != nil && !errors.Is(err, ErrNoVolume) {
		return err
	}
	for _, cp := range mine {
		if pv != nil && string(pv.UID) == cp.Spec.VolumeUID {
			continue // the cache is behind: the PV's own event decides
		}
		dctx, cancel := context.WithTimeout(ctx, APITimeout)
		err := deleteCopy(dctx, c.copies, cp)
		cancel()
		if err != nil {
			return err
		}
		klog.InfoS("Deleted the Copy of a PersistentVolume that no longer exists", "volume_id", name, "copy", cp.Name)
	}
	return nil
}

// removeIfReplaced removes a copy bound to uid once a fresh read confirms
// that the PV of its name is gone or carries another UID.
func (c *Controller) removeIfReplaced(ctx context.Context, name, uid string) error {
	fresh, err := getPVFresh(ctx, c.client, name)
	switch {
	case errors.Is(err, ErrNoVolume):
		if err := c.removeCopy(name, uid, metrics.RemovedOrphan, "its PersistentVolume no longer exists"); err != nil {
			return err
		}
		return c.dropOrphanCopies(ctx, name)
	case err != nil:
		return err
	case string(fresh.UID) != uid:
		if err := c.removeCopy(name, uid, metrics.RemovedOrphan, "its PersistentVolume was deleted and created again"); err != nil {
			return err
		}
		return c.tidyOwn(ctx, fresh) // its Copy of the old UID
	}
	return nil // the cache was behind; the update event brings it back
}

// rerecord restores this node's record on a live PV whose copy this node
// holds: the record vanished (a Node deleted and re-registered, a PV
// replaced without its finalizers), the copy did not.
func (c *Controller) rerecord(ctx context.Context, pv *corev1.PersistentVolume) error {
	if _, err := c.nodes.Get(c.node); err != nil {
		return fmt.Errorf("%w: %v", errOwnNodeAbsent, err)
	}
	_, patched, err := c.tracker.record(ctx, pv.Name)
	if err != nil {
		return fmt.Errorf("restore this node's record: %w", err)
	}
	if patched {
		klog.InfoS("Restored this node's record on a PersistentVolume whose copy it holds", "volume_id", pv.Name, "node", c.node)
	}
	return nil
}

// removeCopy removes the copy of name bound to uid. A copy that changed
// since (ErrCopyChanged) is left, and the error brings the volume back to
// the queue: the next sync decides on the copy that is there.
func (c *Controller) removeCopy(name, uid, kind, reason string) error {
	removed, err := c.disk.RemoveCopy(name, uid)
	if err != nil {
		return fmt.Errorf("remove the copy (%s): %w", reason, err) // held: retried until the pod leaves
	}
	if removed {
		c.metrics.Removed(kind)
		klog.InfoS("Removed this node's copy", "volume_id", name, "reason", reason)
	}
	return nil
}

// forgetGoneNodes deletes, of a PV being deleted, the Copies of nodes whose
// Node object is gone: the API server's own NotFound for each (never an
// error, never a guess). It releases the PV once no Copy is left.
//
// One driver does it: the first live node of those that hold a Copy, by
// name (a live node's own Copy goes only after its copy, so one is there
// until the end). The others that hold a Copy ask about the nodes before
// their own and stop at the first live one; a node that holds none waits
// orphanedAfter (and a share of it of its own, so that not every driver of
// the cluster asks at once), and then acts only if no node that holds a
// Copy is live, so the PV is never stuck.
func (c *Controller) forgetGoneNodes(ctx context.Context, pv *corev1.PersistentVolume) error {
	if !hasFinalizer(pv) {
		return nil
	}
	own, _ := c.OwnCopy(pv.Name, string(pv.UID))
	if own == nil {
		if wait := orphanedAfter + spread(c.node) - time.Since(pv.DeletionTimestamp.Time); wait > 0 {
			c.queue.AddAfter(pv.Name, wait)
			return nil
		}
	}
	cs, err := copiesOf(ctx, c.copies, pv.Name, string(pv.UID))
	if err != nil {
		return err
	}
	recorded := holders(cs)
	others := slices.DeleteFunc(slices.Clone(recorded), func(n string) bool { return n == c.node })
	if len(others) == 0 {
		if own == nil {
			return release(ctx, c.client, c.copies, pv)
		}
		return nil // this node's own removal releases it
	}
	live, err := c.liveNodes(ctx, others)
	if err != nil {
		return err
	}
	before := recorded
	if self := slices.Index(recorded, c.node); self >= 0 {
		before = recorded[:self]
	}
	if slices.ContainsFunc(before, func(n string) bool { return live[n] }) {
		return nil // a live node before this one does it
	}
	gone := slices.DeleteFunc(others, func(n string) bool { return live[n] })
	if err := forgetCopies(ctx, c.copies, cs, gone); err != nil {
		return err
	}
	if len(gone) > 0 {
		klog.InfoS("Deleted the Copies of nodes that are gone", "volume_id", pv.Name, "nodes", len(gone), "first", gone[0])
	}
	if owned := ownedOn(cs, gone); len(owned) > 0 {
		// The garbage collector deletes them; look again soon to release.
		klog.V(2).InfoS("Waiting for the garbage collector to delete the Copies of Nodes that are gone",
			"volume_id", pv.Name, "nodes", len(owned), "first", owned[0])
		c.queue.AddAfter(pv.Name, collectorWait)
		return nil
	}
	return release(ctx, c.client, c.copies, pv)
}

// collectorWait is how long a PV being deleted waits before it is looked at
// again while the garbage collector has yet to delete the Copies of Nodes
// that are gone.
const collectorWait = 10 * time.Second

// forgetGoneLive deletes, of a live PV this node holds, the Copies of nodes
// whose Node object has been missing for the grace period: a store in an
// autoscaled pool would otherwise leave a Copy on every node it ever
// visited. Only holders look (every quarter of the grace period, and no
// more often whatever the PV's events), and of them only the first live
// node by name acts, as on a PV being deleted. A node is missing on the API
// server's own NotFound only, found so at every look of the period
// (goneClock) and by the fresh read that drops it. A node that comes back
// records itself again from the copy on its disk.
func (c *Controller) forgetGoneLive(ctx context.Context, pv *corev1.PersistentVolume) error {
	own, _ := c.OwnCopy(pv.Name, string(pv.UID))
	if c.gone.after <= 0 || !ours(pv) || pv.DeletionTimestamp != nil || own == nil {
		c.gone.dropped(pv.Name)
		return nil
	}
	now := c.gone.now()
	if wait := c.gone.wait(pv.Name, now); wait > 0 {
		c.queue.AddAfter(pv.Name, wait)
		return nil
	}
	cs, err := copiesOf(ctx, c.copies, pv.Name, string(pv.UID))
	if err != nil {
		return err
	}
	recorded := holders(cs)
	self := slices.Index(recorded, c.node)
	// Only Copies no Node owns: the garbage collector deletes an owned
	// Copy with its Node, at once.
	others := slices.DeleteFunc(looseOn(cs), func(n string) bool { return n == c.node })
	var live map[string]bool
	if len(others) > 0 {
		if live, err = c.liveNodes(ctx, others); err != nil {
			return err
		}
	}
	// A live node before this one does it; a node whose Copy its Node owns
	// counts as live unasked (the collector deletes it with the Node).
	if self > 0 && (slices.ContainsFunc(recorded[:self], func(n string) bool { return live[n] }) ||
		len(ownedOn(cs, recorded[:self])) > 0) {
		others = nil
	}
	due, next := c.gone.seen(pv.Name, now, live, others)
	c.queue.AddAfter(pv.Name, next)
	if len(due) == 0 {
		return nil
	}
	if err := forgetCopies(ctx, c.copies, cs, due); err != nil {
		return err
	}
	c.gone.dropped(pv.Name, due...)
	klog.InfoS("Deleted the Copies of nodes gone for longer than the grace period", "volume_id", pv.Name,
		"nodes", len(due), "first", due[0], "grace", c.gone.after)
	return nil
}

// orphanedAfter is how long a PV has been being deleted before a node that
// holds no record of it drops the records of gone nodes that no live node
// recorded on it can drop.
const orphanedAfter = 2 * time.Minute

// spread is this node's own share of orphanedAfter, the same at every start.
func spread(node string) time.Duration {
	h := fnv.New32a()
	_, _ = h.Write([]byte(node))
	return time.Duration(h.Sum32()) % orphanedAfter
}

// askEach is how many nodes are asked about one GET each; more are read by
// one paged list of every Node's metadata.
const askEach = 8

// liveNodes says which of nodes exist. A node is gone only on the API
// server's own NotFound for it, or when a complete list of Nodes lacks it;
// a GET that fails otherwise counts the node as live.
func (c *Controller) liveNodes(ctx context.Context, nodes []string) (map[string]bool, error) {
	live := make(map[string]bool, len(nodes))
	if len(nodes) <= askEach {
		for _, n := range nodes {
			gctx, cancel := context.WithTimeout(ctx, APITimeout)
			_, err := c.meta.Resource(nodesResource).Get(gctx, n, metav1.GetOptions{})
			cancel()
			live[n] = !apiSaysGone(err, "nodes", n)
		}
		return live, nil
	}
	want := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		want[n] = true
	}
	err := c.eachMetadata(ctx, nodesResource, func(n *metav1.PartialObjectMetadata) {
		if want[n.Name] {
			live[n.Name] = true
		}
	})
	if err != nil {
		return nil, apiError(err, "list Nodes to find which of the %d recorded are gone", len(nodes))
	}
	return live, nil
}

// eachMetadata calls fn with the metadata of every object of the
// cluster-scoped resource gvr, listed a page of listPage at a time.
func (c *Controller) eachMetadata(ctx context.Context, gvr schema.GroupVersionResource, fn func(*metav1.PartialObjectMetadata)) error {
	opts := metav1.ListOptions{Limit: listPage}
	for {
		lctx, cancel := context.WithTimeout(ctx, APITimeout)
		page, err := c.meta.Resource(gvr).List(lctx, opts)
		cancel()
		if err != nil {
			return err
		}
		for i := range page.Items {
			fn(&page.Items[i])
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			return nil
		}
	}
}

// getPVFresh is getPV with its own timeout.
func getPVFresh(ctx context.Context, client kube.PersistentVolumes, name string) (*corev1.PersistentVolume, error) {
	ctx, cancel := context.WithTimeout(ctx, APITimeout)
	defer cancel()
	return getPV(ctx, client, name)
}
