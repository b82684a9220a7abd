package reclaim

import (
	"context"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// DriverName is the CSI driver whose PersistentVolumes are reconciled.
const DriverName = "per-node.liken.sh"

// Copies is this node's side: the copies on disk.
type Copies interface {
	// Handles lists the volumes this node holds a copy of.
	Handles() ([]string, error)
	// CopyUID is the UID of the PV a copy is bound to ("" if unbound).
	CopyUID(handle string) (string, error)
	// RemoveCopy removes a copy unless a pod on this node holds it.
	RemoveCopy(handle string) (bool, error)
	// EmptyTrash removes copies a crash left half-removed.
	EmptyTrash()
}

// Controller removes this node's copies of deleted PersistentVolumes, and
// the records of Nodes that are gone.
type Controller struct {
	client kubernetes.Interface
	node   string
	copies Copies
	queue  workqueue.TypedRateLimitingInterface[string]
	pvs    listersv1.PersistentVolumeLister
}

// NewController returns the controller of node.
func NewController(client kubernetes.Interface, node string, copies Copies) *Controller {
	return &Controller{client: client, node: node, copies: copies,
		queue: workqueue.NewTypedRateLimitingQueue(workqueue.NewTypedItemExponentialFailureRateLimiter[string](500*time.Millisecond, 10*time.Second))}
}

// Run reconciles until ctx ends.
func (c *Controller) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactory(c.client, 30*time.Second)
	pvInformer := factory.Core().V1().PersistentVolumes()
	c.pvs = pvInformer.Lister()
	onPV := func(obj any) {
		if pv, ok := obj.(*corev1.PersistentVolume); ok && ours(pv) {
			c.queue.Add(pv.Name)
		}
	}
	if _, err := pvInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: onPV, UpdateFunc: func(_, n any) { onPV(n) },
	}); err != nil {
		return err
	}
	if _, err := factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) { c.enqueueHeldBy(nodeName(obj)) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	c.reconcileLocal(ctx)
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	for c.next(ctx) {
	}
	factory.Shutdown()
	return nil
}

func nodeName(obj any) string {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		return n.Name
	}
	return ""
}

func ours(pv *corev1.PersistentVolume) bool {
	return pv.Spec.CSI != nil && pv.Spec.CSI.Driver == DriverName
}

// enqueueHeldBy queues every PV that lists node as a holder.
func (c *Controller) enqueueHeldBy(node string) {
	if node == "" {
		return
	}
	pvs, _ := c.pvs.List(everything)
	for _, pv := range pvs {
		if slices.Contains(pv.Finalizers, Finalizer(node)) {
			c.queue.Add(pv.Name)
		}
	}
}

func (c *Controller) next(ctx context.Context) bool {
	name, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(name)
	if err := c.sync(ctx, name); err != nil {
		klog.InfoS("Will retry", "volume_id", name, "reason", err.Error())
		c.queue.AddRateLimited(name)
		return true
	}
	c.queue.Forget(name)
	return true
}

// sync handles one PV: this node's copy if the PV is going away, and the
// records of nodes that no longer exist.
func (c *Controller) sync(ctx context.Context, name string) error {
	pv, err := c.pvs.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := c.forgetGoneNodes(ctx, pv); err != nil {
		return err
	}
	if !removable(pv) || !slices.Contains(pv.Finalizers, Finalizer(c.node)) {
		return nil
	}
	if _, err := c.copies.RemoveCopy(name); err != nil {
		return err // held by a pod on this node: retried until it leaves
	}
	if err := Forget(ctx, c.client, name, c.node); err != nil {
		return err
	}
	klog.InfoS("Copy removed and this node's record dropped", "volume_id", name, "node", c.node)
	return nil
}

// forgetGoneNodes drops the records of nodes whose Node object is gone,
// each confirmed by a fresh read (never on a cache miss or an error).
func (c *Controller) forgetGoneNodes(ctx context.Context, pv *corev1.PersistentVolume) error {
	for _, f := range pv.Finalizers {
		node, ok := strings.CutPrefix(f, FinalizerPrefix)
		if !ok || Finalizer(node) != f || node == c.node {
			continue // hashed names cannot be read back; their node removes them
		}
		_, err := c.client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			continue
		}
		if err := Forget(ctx, c.client, pv.Name, node); err != nil {
			return err
		}
		klog.InfoS("Dropped the record of a node that is gone", "volume_id", pv.Name, "node", node)
	}
	return nil
}

// reconcileLocal runs once at start: it empties the trash, removes copies
// whose PV is gone, is another PV of the same name, or no longer lists this
// node, and queues the rest.
func (c *Controller) reconcileLocal(ctx context.Context) {
	c.copies.EmptyTrash()
	handles, err := c.copies.Handles()
	if err != nil {
		klog.ErrorS(err, "Cannot list this node's copies")
		return
	}
	for _, h := range handles {
		uid, err := c.copies.CopyUID(h)
		if err != nil {
			klog.ErrorS(err, "Cannot read a copy's PV UID", "volume_id", h)
			continue
		}
		pv, err := c.client.CoreV1().PersistentVolumes().Get(ctx, h, metav1.GetOptions{})
		reason := ""
		switch {
		case apierrors.IsNotFound(err):
			reason = "its PersistentVolume no longer exists"
		case err != nil:
			klog.ErrorS(err, "Cannot check a copy's PersistentVolume; keeping the copy", "volume_id", h)
			continue
		case uid != "" && string(pv.UID) != uid:
			reason = "its PersistentVolume was deleted and created again"
		case uid != "" && !slices.Contains(pv.Finalizers, Finalizer(c.node)):
			// (A copy with no UID predates tracking: the next publish adopts it.)
			reason = "its PersistentVolume no longer lists this node"
		}
		if reason == "" {
			c.queue.Add(h)
			continue
		}
		if _, err := c.copies.RemoveCopy(h); err != nil {
			klog.ErrorS(err, "Cannot remove an orphaned copy", "volume_id", h, "reason", reason)
			continue
		}
		klog.InfoS("Removed an orphaned copy", "volume_id", h, "reason", reason)
	}
}
