// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/e2e-framework/klient/k8s/resources"

	"liken.sh/per-node/e2e/internal/harness"
	"liken.sh/per-node/fixtures/store/kv"
)

// Steps of day-2 operations: the driver rolled to another image and back,
// mounts that must stay in place through it, events seen since.

const (
	driverNamespace = "per-node-system"
	driverDaemonSet = "per-node-node"
	driverContainer = "driver"
	// secondTag is appended to the driver image's tag to make the second
	// tag an upgrade rolls to: the same build, so only the process changes.
	secondTag = "-second"
)

func (r *Run) driverDaemonSet(ctx context.Context) (*appsv1.DaemonSet, string, error) {
	var ds appsv1.DaemonSet
	if err := r.env.R.Get(ctx, driverDaemonSet, driverNamespace, &ds); err != nil {
		return nil, "", err
	}
	for _, c := range ds.Spec.Template.Spec.Containers {
		if c.Name == driverContainer {
			return &ds, c.Image, nil
		}
	}
	return nil, "", fmt.Errorf("DaemonSet %s/%s has no container %q", driverNamespace, driverDaemonSet, driverContainer)
}

// stepRollDriverSecondTag tags the driver's image a second time on every
// node (no registry: containerd's own store) and rolls the DaemonSet to it.
func stepRollDriverSecondTag(ctx context.Context, r *Run, _ args) error {
	if _, err := r.noteDriverImage(ctx); err != nil {
		return err
	}
	next := r.vars["_driver_image"] + secondTag
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return err
	}
	for _, n := range nodes.Items {
		if _, err := r.onNode(ctx, n.Name, "ctr", "-n", "k8s.io", "images", "tag", "--force", r.vars["_driver_image"], next); err != nil {
			return fmt.Errorf("tag the driver image on %s: %w", n.Name, err)
		}
	}
	return r.rollDriver(ctx, next)
}

// noteDriverImage returns the running driver's image, and notes the first
// one a scenario saw as the image to go back to (_driver_image).
func (r *Run) noteDriverImage(ctx context.Context) (string, error) {
	_, current, err := r.driverDaemonSet(ctx)
	if err != nil {
		return "", err
	}
	if r.vars["_driver_image"] == "" {
		r.vars["_driver_image"] = current
	}
	return current, nil
}

func stepRollDriverBack(ctx context.Context, r *Run, _ args) error {
	if r.vars["_driver_image"] == "" {
		return fmt.Errorf("the driver was not rolled to another image in this scenario")
	}
	return r.rollDriver(ctx, r.vars["_driver_image"])
}

// rollDriver upgrades the chart's release to image and waits until every node
// runs a ready driver pod of it. The update strategy must never run two
// driver processes on one node: it is checked before the roll, and every
// poll during the roll counts the running driver containers on each node.
func (r *Run) rollDriver(ctx context.Context, image string) error {
	ds, _, err := r.driverDaemonSet(ctx)
	if err != nil {
		return err
	}
	if err := oneDriverPerNode(ds); err != nil {
		return err
	}
	if err := r.documentedUpgrade(ctx, image); err != nil {
		return err
	}
	delete(r.vars, "_older_chart")
	return r.waitDriverOn(ctx, image, "rolled")
}

// waitDriverOn waits until every node runs a ready driver pod of image,
// and never two driver processes on one node; it logs how long it took.
func (r *Run) waitDriverOn(ctx context.Context, image, how string) error {
	start := time.Now()
	err := harness.Until(ctx, "every node to run a ready driver pod of "+image, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var pods corev1.PodList
		if err := r.listIn(ctx, driverNamespace, &pods, "app.kubernetes.io/name=per-node", ""); err != nil {
			return false, "", harness.Unobserved(err)
		}
		if twice := runningTwice(pods.Items); twice != "" {
			return false, "", fmt.Errorf("two driver processes ran on one node at once: %s", twice)
		}
		ds, _, err := r.driverDaemonSet(ctx)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		s := ds.Status
		done := s.ObservedGeneration >= ds.Generation && s.UpdatedNumberScheduled == s.DesiredNumberScheduled &&
			s.NumberReady == s.DesiredNumberScheduled && s.NumberAvailable == s.DesiredNumberScheduled &&
			allOn(pods.Items, image, int(s.DesiredNumberScheduled))
		return done, fmt.Sprintf("updated %d, ready %d of %d; %s", s.UpdatedNumberScheduled, s.NumberReady,
			s.DesiredNumberScheduled, r.driverPodsReport(pods.Items)), nil
	})
	if err == nil {
		r.t.Logf("the driver %s: %s on every node in %s", how, image, time.Since(start).Round(100*time.Millisecond))
	}
	return err
}

// documentedUpgrade runs README's upgrade (harness.UpgradeArgs) to image,
// which must be the running driver's repository under another tag. Helm
// refusing to render the chart is the documented upgrade broken; any other
// failure of helm is a failed action.
func (r *Run) documentedUpgrade(ctx context.Context, image string) error {
	_, current, err := r.driverDaemonSet(ctx)
	if err != nil {
		return err
	}
	repository, tag, err := harness.SplitImage(image)
	if err != nil {
		return err
	}
	if running, _, err := harness.SplitImage(current); err != nil || running != repository {
		return fmt.Errorf("the upgrade changes the tag only: %s is not a tag of the running %s", image, current)
	}
	args := append(harness.UpgradeArgs(harness.Chart(r.env.Repo), tag), "--kubeconfig", r.env.Kubeconfig)
	_, err = harness.Helm(ctx, r.env.Repo, args...)
	if err != nil && renderRefused.MatchString(err.Error()) {
		return fmt.Errorf("%w: expected README's upgrade to roll the driver to %s; seen helm refuse it: %v", harness.ErrNotSeen, image, err)
	}
	return err
}

// renderRefused is how helm says the chart did not render with the values
// it was given (a template's error, or the values' schema).
var renderRefused = regexp.MustCompile(`template: |nil pointer evaluating|values don't meet the specifications of the schema`)

// stepInstallOlderChart installs the driver, at its running image and with
// the suite's values, from the chart as it was before value was added:
// the release a user upgrades from.
func stepInstallOlderChart(ctx context.Context, r *Run, a args) error {
	current, err := r.noteDriverImage(ctx)
	if err != nil {
		return err
	}
	old, err := harness.OlderChart(r.env.Repo, r.t.TempDir(), a["value"])
	if err != nil {
		return err
	}
	image, err := harness.ImageValues(current)
	if err != nil {
		return err
	}
	args := append([]string{"upgrade", harness.DriverRelease, old, "--kubeconfig", r.env.Kubeconfig,
		"-n", harness.DriverNamespace, "--reset-values"}, image...)
	for _, v := range harness.SuiteValues {
		args = append(args, "--set", v)
	}
	r.vars["_older_chart"] = old
	if _, err := harness.Helm(ctx, r.env.Repo, args...); err != nil {
		return err
	}
	r.t.Logf("the driver's release is now chart %s (without %s), image %s", old, a["value"], current)
	return nil
}

// oneDriverPerNode refuses an update strategy that may start a node's new
// driver pod before its old one is gone.
func oneDriverPerNode(ds *appsv1.DaemonSet) error {
	s := ds.Spec.UpdateStrategy
	if s.Type == appsv1.RollingUpdateDaemonSetStrategyType && s.RollingUpdate != nil && s.RollingUpdate.MaxSurge != nil &&
		s.RollingUpdate.MaxSurge.String() != "0" && s.RollingUpdate.MaxSurge.String() != "0%" {
		return fmt.Errorf("expected the driver DaemonSet's rolling update to surge by 0 (one driver process per node); seen maxSurge %s",
			s.RollingUpdate.MaxSurge.String())
	}
	return nil
}

// runningTwice names a node with more than one running driver container.
func runningTwice(pods []corev1.Pod) string {
	running := map[string][]string{}
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == driverContainer && cs.State.Running != nil {
				running[p.Spec.NodeName] = append(running[p.Spec.NodeName], p.Name)
			}
		}
	}
	for node, names := range running {
		if len(names) > 1 {
			return fmt.Sprintf("node %s: %s", node, strings.Join(names, ", "))
		}
	}
	return ""
}

// allOn reports whether exactly n driver pods exist, each ready and each
// running image.
func allOn(pods []corev1.Pod, image string, n int) bool {
	if len(pods) != n {
		return false
	}
	for _, p := range pods {
		if p.DeletionTimestamp != nil || !harness.PodReady(&p) {
			return false
		}
		for _, c := range p.Spec.Containers {
			if c.Name == driverContainer && c.Image != image {
				return false
			}
		}
	}
	return true
}

// restoreDriver rolls the driver back to its image, and its release to
// the chart, if the scenario left it on another (cleanup).
func (r *Run) restoreDriver(ctx context.Context) {
	want := r.vars["_driver_image"]
	if want == "" {
		return
	}
	if _, current, err := r.driverDaemonSet(ctx); err == nil && current == want && r.vars["_older_chart"] == "" {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	if err := r.rollDriver(rctx, want); err != nil {
		r.t.Errorf("cleanup: rolling the driver back to %s: %v", want, err)
	}
}

// podMount is how a node's kernel shows a pod's volume mount: the mount
// IDs (with device and root) at the pod's target and the unique ID of the
// mount on top. A new mount gets a new unique ID, so an unmount and
// remount, however quick, changes it.
func (r *Run) podMount(ctx context.Context, pod string) (node string, mount []string, err error) {
	var p corev1.Pod
	if err := r.env.R.Get(ctx, pod, r.ns(), &p); err != nil {
		return "", nil, err
	}
	target := podTarget(p.UID, r.vars["pv"])
	out, err := r.onNode(ctx, p.Spec.NodeName, "cat", "/proc/1/mountinfo")
	if err != nil {
		return "", nil, err
	}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) > 4 && f[4] == target {
			mount = append(mount, fmt.Sprintf("id %s dev %s root %s", f[0], f[2], f[3]))
		}
	}
	if len(mount) == 0 {
		return "", nil, fmt.Errorf("node %s shows nothing mounted at %s (pod %s)", p.Spec.NodeName, target, pod)
	}
	slices.Sort(mount)
	// mountinfo's IDs are reused at once after an unmount; the kernel's
	// unique mount ID (statx, Linux 6.8+) never is.
	unique, err := r.uniqueMountID(ctx, p.Spec.NodeName, target)
	if err != nil {
		return "", nil, err
	}
	return p.Spec.NodeName, append(mount, "unique id "+unique), nil
}

// uniqueMountID is the never-reused ID of the mount at path in a kind
// node's mount namespace, read through the node container's /proc root.
func (r *Run) uniqueMountID(ctx context.Context, node, path string) (string, error) {
	pid, err := harness.Run(ctx, r.env.Repo, "docker", "inspect", "-f", "{{.State.Pid}}", node)
	if err != nil {
		return "", err
	}
	var st unix.Statx_t
	full := "/proc/" + strings.TrimSpace(pid) + "/root" + path
	if err := unix.Statx(unix.AT_FDCWD, full, unix.AT_SYMLINK_NOFOLLOW, unix.STATX_MNT_ID_UNIQUE, &st); err != nil {
		return "", fmt.Errorf("statx %s: %w", full, err)
	}
	if st.Mask&unix.STATX_MNT_ID_UNIQUE == 0 {
		return "", fmt.Errorf("statx %s: this kernel gives no unique mount ID (Linux 6.8+ does)", full)
	}
	return strconv.FormatUint(st.Mnt_id, 10), nil
}

func stepPickMount(ctx context.Context, r *Run, a args) error {
	node, mount, err := r.podMount(ctx, a["pod"])
	if err != nil {
		return err
	}
	r.lists[a["as"]] = append([]string{a["pod"], node}, mount...)
	r.vars[a["as"]] = a["as"]
	r.t.Logf("the mount of %s on %s: %s", a["pod"], node, strings.Join(mount, "; "))
	return nil
}

func stepMountUnchanged(ctx context.Context, r *Run, a args) error {
	had, ok := r.lists[a["mount"]]
	if !ok || len(had) < 3 {
		return fmt.Errorf("%s is not a mount picked in this scenario", a["mount"])
	}
	node, mount, err := r.podMount(ctx, had[0])
	if err != nil {
		return err
	}
	if node != had[1] || !slices.Equal(mount, had[2:]) {
		return fmt.Errorf("expected the mount of %s on %s to be the one it had (%s); seen on %s: %s",
			had[0], had[1], strings.Join(had[2:], "; "), node, strings.Join(mount, "; "))
	}
	return nil
}

// stepEventSinceDriver waits for an event about a pod naming the holder
// that happened after the node's current driver process started: proof
// that the driver running now, not the one before it, refused the pod.
func stepEventSinceDriver(ctx context.Context, r *Run, a args) error {
	pods, err := r.driverPodsOn(ctx, a["node"])
	if err != nil {
		return err
	}
	var started time.Time
	for _, p := range pods {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == driverContainer && cs.State.Running != nil && cs.State.Running.StartedAt.After(started) {
				started = cs.State.Running.StartedAt.Time
			}
		}
	}
	if started.IsZero() {
		return fmt.Errorf("no driver container runs on %s: %s", a["node"], r.driverPodsReport(pods))
	}
	mention := r.ns() + "/" + a["holder"]
	what := fmt.Sprintf("a %s event on pod %s naming %s, after the driver on %s started at %s",
		a["reason"], a["pod"], mention, a["node"], started.Format(time.TimeOnly))
	return r.waitEventSince(ctx, r.ns(), a["pod"], a["reason"], mention, what, started)
}

// lastSeen is when an event last happened, whichever API wrote it.
func lastSeen(e corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	if e.EventTime.After(t) {
		t = e.EventTime.Time
	}
	return t
}

// mountWatch samples a node's mount table and remembers the most pods that
// had one PV's copy mounted at once.
type mountWatch struct {
	node, pv string
	cancel   context.CancelFunc
	done     chan struct{}

	mu       sync.Mutex
	samples  int
	most     []string             // the pod UIDs of the sample with the most
	seen     []string             // every pod UID seen, in the order first seen
	lastSeen map[string]time.Time // when a sample last showed each pod UID's mount (read started)
	lastErr  error
}

// podsMounting lists the pod UIDs whose volume target of pv is a mount
// point in a node's mount table.
func podsMounting(mountinfo, pv string) []string {
	suffix := "/volumes/kubernetes.io~csi/" + pv + "/mount"
	var uids []string
	for line := range strings.Lines(mountinfo) {
		f := strings.Fields(line)
		if len(f) <= 4 || !strings.HasPrefix(f[4], kubeletDir+"/pods/") || !strings.HasSuffix(f[4], suffix) {
			continue
		}
		uid := strings.TrimSuffix(strings.TrimPrefix(f[4], kubeletDir+"/pods/"), suffix)
		if !slices.Contains(uids, uid) {
			uids = append(uids, uid)
		}
	}
	return uids
}

func stepWatchMounts(_ context.Context, r *Run, a args) error {
	ctx, cancel := context.WithCancel(context.Background())
	w := &mountWatch{node: a["node"], pv: r.vars["pv"], cancel: cancel, done: make(chan struct{}), lastSeen: map[string]time.Time{}}
	r.watches[a["as"]] = w
	r.vars[a["as"]] = a["as"]
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			at := time.Now()
			out, err := r.onNode(ctx, w.node, "cat", "/proc/1/mountinfo")
			w.mu.Lock()
			if err == nil {
				w.samples++
				uids := podsMounting(out, w.pv)
				for _, u := range uids {
					w.lastSeen[u] = at
				}
				if len(uids) > len(w.most) {
					w.most = uids
				}
				for _, u := range uids {
					if !slices.Contains(w.seen, u) {
						w.seen = append(w.seen, u)
					}
				}
			} else if ctx.Err() == nil {
				w.lastErr = err
			}
			w.mu.Unlock()
			_ = sleep(ctx, 100*time.Millisecond)
		}
	}()
	return nil
}

func (w *mountWatch) stop() {
	w.cancel()
	<-w.done
}

func stepStopWatch(_ context.Context, r *Run, a args) error {
	w, ok := r.watches[a["watch"]]
	if !ok {
		return fmt.Errorf("%s is not a running watch", a["watch"])
	}
	w.stop()
	delete(r.watches, a["watch"])
	w.mu.Lock()
	defer w.mu.Unlock()
	r.t.Logf("%d samples of %s's mount table; pods with %s mounted, in turn: %v; most at once: %d %v",
		w.samples, w.node, w.pv, w.seen, len(w.most), w.most)
	switch {
	case w.samples == 0:
		return fmt.Errorf("no sample of %s's mount table was read (last error: %v)", w.node, w.lastErr)
	case len(w.most) > 1:
		return fmt.Errorf("expected at most one pod at a time with the copy of %s mounted on %s; seen %d at once: pod UIDs %s",
			w.pv, w.node, len(w.most), strings.Join(w.most, ", "))
	}
	return nil
}

// busySlack: how long before the end of a busy spell a mount may be last
// seen, for the samples' spacing (a read of the mount table is an exec into
// the node, slower on a busy machine).
const busySlack = 5 * time.Second

// stepMountStayedWhileBusy: the pod's mount was in the node's mount table
// until its busy spell (keep the mount of {pod} busy) ended. An unmount
// that detached it lazily instead of failing with EBUSY takes it out of the
// table at once, while its last user still works in it.
func stepMountStayedWhileBusy(_ context.Context, r *Run, a args) error {
	w, ok := r.watches[a["watch"]]
	if !ok {
		return fmt.Errorf("%s is not a running watch", a["watch"])
	}
	uid, until := r.vars["_busy_uid_"+a["pod"]], r.marks["busy until "+a["pod"]]
	if uid == "" {
		return fmt.Errorf("the mount of %s was never kept busy", a["pod"])
	}
	w.mu.Lock()
	last, seen := w.lastSeen[uid]
	w.mu.Unlock()
	switch {
	case !seen:
		return fmt.Errorf("%s never saw the mount of pod %s (UID %s)", a["watch"], a["pod"], uid)
	case last.Before(until.Add(-busySlack)):
		return fmt.Errorf("%w: expected the mount of pod %s in %s's mount table until its last user left at %s; last seen at %s",
			harness.ErrNotSeen, a["pod"], w.node, until.Format("15:04:05.000"), last.Format("15:04:05.000"))
	}
	r.t.Logf("the mount of %s was last seen at %s; its last user left at %s", a["pod"], last.Format("15:04:05.000"), until.Format("15:04:05.000"))
	return nil
}

// stepForceDelete deletes a pod with no grace period, as
// `kubectl delete pod --grace-period=0 --force` does: the API object goes
// at once, whatever its containers still do.
func stepForceDelete(ctx context.Context, r *Run, a args) error {
	p := &corev1.Pod{}
	p.Name, p.Namespace = a["pod"], r.ns()
	return r.env.R.Delete(ctx, p, resources.WithGracePeriod(0))
}

func stepStopKubelet(ctx context.Context, r *Run, a args) error {
	r.lists["_kubelet_stopped"] = append(r.lists["_kubelet_stopped"], a["node"])
	_, err := r.onNode(ctx, a["node"], "systemctl", "stop", "kubelet")
	return err
}

func stepStartKubelet(ctx context.Context, r *Run, a args) error {
	r.lists["_kubelet_stopped"] = slices.DeleteFunc(r.lists["_kubelet_stopped"], func(n string) bool { return n == a["node"] })
	since := time.Now()
	r.marks["kubelet on "+a["node"]] = since
	if _, err := r.onNode(ctx, a["node"], "systemctl", "start", "kubelet"); err != nil {
		return err
	}
	return r.waitKubelet(ctx, a["node"], since)
}

// stepEventSinceKubelet waits for an event naming the holder that happened
// after kubelet on the node was last (re)started in this scenario.
func stepEventSinceKubelet(ctx context.Context, r *Run, a args) error {
	since, ok := r.marks["kubelet on "+a["node"]]
	if !ok {
		return fmt.Errorf("kubelet on %s was not restarted in this scenario", a["node"])
	}
	mention := r.ns() + "/" + a["holder"]
	what := fmt.Sprintf("a %s event on pod %s naming %s, after kubelet on %s restarted at %s",
		a["reason"], a["pod"], mention, a["node"], since.Format(time.TimeOnly))
	return r.waitEventSince(ctx, r.ns(), a["pod"], a["reason"], mention, what, since)
}

// --- the API server away ----------------------------------------------------

// apiServerManifest is kube-apiserver's static pod manifest on a kind
// control-plane node; kubelet stops the API server when it goes away.
const apiServerManifest = "/etc/kubernetes/manifests/kube-apiserver.yaml"

func (r *Run) controlPlane(ctx context.Context) (string, error) {
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return "", err
	}
	for _, n := range nodes.Items {
		if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok {
			return n.Name, nil
		}
	}
	return "", fmt.Errorf("no control-plane node")
}

// apiAnswers reports whether the API server answers a read.
func (r *Run) apiAnswers(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return r.env.R.Get(actx, "default", "", &corev1.Namespace{})
}

func stepStopAPIServer(ctx context.Context, r *Run, _ args) error {
	cp, err := r.controlPlane(ctx)
	if err != nil {
		return err
	}
	r.vars["_api_stopped_on"] = cp
	if _, err := r.onNode(ctx, cp, "mv", apiServerManifest, "/etc/kubernetes/kube-apiserver.yaml.stopped"); err != nil {
		return err
	}
	start := time.Now()
	err = harness.Until(ctx, "the API server to stop answering", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		err := r.apiAnswers(ctx)
		return err != nil, fmt.Sprintf("a read answered: %v", err), nil
	})
	if err == nil {
		r.t.Logf("the API server stopped answering %s after its manifest was moved", time.Since(start).Round(100*time.Millisecond))
	}
	return err
}

func stepStartAPIServer(ctx context.Context, r *Run, _ args) error {
	cp := r.vars["_api_stopped_on"]
	if cp == "" {
		return fmt.Errorf("the API server was not stopped in this scenario")
	}
	if _, err := r.onNode(ctx, cp, "mv", "/etc/kubernetes/kube-apiserver.yaml.stopped", apiServerManifest); err != nil {
		return err
	}
	delete(r.vars, "_api_stopped_on")
	start := time.Now()
	err := harness.Until(ctx, "the API server to answer again", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		err := r.apiAnswers(ctx)
		return err == nil, fmt.Sprint(err), nil
	})
	if err == nil {
		r.t.Logf("the API server answered %s after its manifest was back", time.Since(start).Round(100*time.Millisecond))
	}
	return err
}

// driverPID is the node-side PID of the driver process on node, found
// through the node's container runtime (no API server involved).
func (r *Run) driverPID(ctx context.Context, node string) (string, error) {
	out, err := r.onNode(ctx, node, "sh", "-c",
		`crictl inspect --output go-template --template '{{.info.pid}}' $(crictl ps -q --name '^`+driverContainer+`$' --label io.kubernetes.pod.namespace=`+driverNamespace+`)`)
	return strings.TrimSpace(out), err
}

// stepFreezeDriver stops the driver process on a node (SIGSTOP): calls
// from kubelet wait, unanswered, until it is thawed.
func stepFreezeDriver(ctx context.Context, r *Run, a args) error {
	pid, err := r.driverPID(ctx, a["node"])
	if err != nil {
		return err
	}
	r.lists["_frozen"] = append(r.lists["_frozen"], a["node"]+" "+pid)
	_, err = r.onNode(ctx, a["node"], "kill", "-STOP", pid)
	return err
}

func stepThawDriver(ctx context.Context, r *Run, a args) error {
	for i, f := range r.lists["_frozen"] {
		node, pid, _ := strings.Cut(f, " ")
		if node == a["node"] {
			r.lists["_frozen"] = slices.Delete(r.lists["_frozen"], i, i+1)
			// kubelet may have restarted a driver frozen past its liveness
			// probe: then there is nothing left to thaw.
			out, err := r.onNode(ctx, node, "sh", "-c", "kill -CONT "+pid+" 2>&1 || echo gone")
			if strings.Contains(out, "gone") {
				r.t.Logf("the frozen driver on %s (pid %s) is gone: kubelet restarted it", node, pid)
			}
			return err
		}
	}
	return fmt.Errorf("the driver on %s was not frozen in this scenario", a["node"])
}

// stepDriverRefusedWith waits for the driver's log on a node (read through
// the node's container runtime) to show a NodePublishVolume for the pod
// that failed with the gRPC code.
func stepDriverRefusedWith(ctx context.Context, r *Run, a args) error {
	want := []string{`"RPC failed"`, `method="/csi.v1.Node/NodePublishVolume"`, `pod="` + r.ns() + "/" + a["pod"] + `"`, `code="` + a["code"] + `"`}
	what := fmt.Sprintf("the driver on %s to log a NodePublishVolume for pod %s that failed with %s", a["node"], a["pod"], a["code"])
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		out, err := r.onNode(ctx, a["node"], "sh", "-c",
			`crictl logs $(crictl ps -q --name '^`+driverContainer+`$' --label io.kubernetes.pod.namespace=`+driverNamespace+`) 2>&1`)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		var last string
		for line := range strings.Lines(out) {
			if strings.Contains(line, "NodePublishVolume") {
				last = strings.TrimSpace(line)
			}
			if containsAll(line, want) {
				r.t.Logf("driver on %s: %s", a["node"], strings.TrimSpace(line))
				return true, "", nil
			}
		}
		return false, "last NodePublishVolume line: " + last, nil
	})
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// restoreControlPlane starts the API server and thaws drivers a failed
// scenario left stopped (cleanup; everything else needs them).
func (r *Run) restoreControlPlane(ctx context.Context) {
	if r.vars["_api_stopped_on"] != "" {
		sctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		if err := stepStartAPIServer(sctx, r, nil); err != nil {
			r.t.Errorf("cleanup: starting the API server: %v", err)
		}
		cancel()
	}
	// stepThawDriver takes each driver off the list, thawed or not.
	for _, f := range slices.Clone(r.lists["_frozen"]) {
		node, _, _ := strings.Cut(f, " ")
		if err := stepThawDriver(ctx, r, args{"node": node}); err != nil {
			r.t.Errorf("cleanup: thawing the driver on %s: %v", node, err)
		}
	}
}

// --- a full disk -----------------------------------------------------------

// smallFS is the script that gives a node's idle copy of a PV a tmpfs of
// its own, with the copy's contents, where the copy's directory was.
const smallFS = `set -e
cd %[1]s/volumes/%[2]s
if mountpoint -q data; then echo "data is already a mount point" >&2; exit 1; fi
mv data data.disk
mkdir data
mount -t tmpfs -o size=%[3]sm,mode=0777 per-node-small data
cp -a data.disk/. data/
rm -rf data.disk`

// diskFS is the reverse: the copy's contents back on the node's disk.
const diskFS = `set -e
cd %[1]s/volumes/%[2]s
mountpoint -q data || exit 0
rm -f data/filler
mkdir data.disk
chmod 0777 data.disk
cp -a data/. data.disk/
umount data
rmdir data
mv data.disk data`

func stepSmallFS(ctx context.Context, r *Run, a args) error {
	r.lists["_small"] = append(r.lists["_small"], a["node"])
	_, err := r.onNode(ctx, a["node"], "sh", "-c", fmt.Sprintf(smallFS, copiesRoot, r.vars["pv"], a["mib"]))
	return err
}

func stepDiskFS(ctx context.Context, r *Run, a args) error {
	r.lists["_small"] = slices.DeleteFunc(r.lists["_small"], func(n string) bool { return n == a["node"] })
	_, err := r.onNode(ctx, a["node"], "sh", "-c", fmt.Sprintf(diskFS, copiesRoot, r.vars["pv"]))
	return err
}

// stepFillFS fills the copy's filesystem with a filler file.
func stepFillFS(ctx context.Context, r *Run, a args) error {
	dir := fmt.Sprintf("%s/volumes/%s/data", copiesRoot, r.vars["pv"])
	out, err := r.onNode(ctx, a["node"], "sh", "-c",
		fmt.Sprintf(`mountpoint -q %[1]s || { echo "%[1]s has no filesystem of its own" >&2; exit 1; }
dd if=/dev/zero of=%[1]s/filler bs=64k 2>/dev/null; df -k %[1]s | tail -1`, dir))
	r.t.Logf("%s: %s", a["node"], strings.TrimSpace(out))
	return err
}

func stepFreeFS(ctx context.Context, r *Run, a args) error {
	_, err := r.onNode(ctx, a["node"], "rm", "-f", fmt.Sprintf("%s/volumes/%s/data/filler", copiesRoot, r.vars["pv"]))
	return err
}

// restoreDisks puts copies given a filesystem of their own back on their
// nodes' disks once no pod uses them (cleanup, before the PVs are deleted).
func (r *Run) restoreDisks(ctx context.Context) {
	for len(r.lists["_small"]) > 0 {
		n := r.lists["_small"][0]
		if err := stepDiskFS(ctx, r, args{"node": n}); err != nil {
			r.t.Errorf("cleanup: putting the copy on %s back on its disk: %v", n, err)
		}
	}
}

// stepWriteUntilRefused writes one record at a time through a pod until a
// write is refused, which must happen within 1,000 writes and carry the
// given status; the writes acknowledged before it are defined as a list (a
// full filesystem may still take a few records into the last page of the
// log: what is acknowledged must then be stored).
func stepWriteUntilRefused(ctx context.Context, r *Run, a args) error {
	prefix := r.writePrefix(a["as"])
	var acked []kv.Record
	for i := range 1000 {
		recs, err := r.put(ctx, a["pod"], prefix+"-"+strconv.Itoa(i), 1)
		acked = append(acked, recs...)
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return fmt.Errorf("expected %s to refuse a write with %s; it acknowledged %d before the step's time ran out: %w",
				a["pod"], a["status"], len(acked), err)
		}
		if !strings.Contains(err.Error(), a["status"]) {
			return fmt.Errorf("expected %s to refuse a write with %s; seen: %v", a["pod"], a["status"], err)
		}
		r.t.Logf("%s refused write %d (%d acknowledged before it): %v", a["pod"], i+1, len(acked), err)
		r.defineWritten(a["as"], acked)
		return nil
	}
	return fmt.Errorf("expected %s to refuse a write with %s; it acknowledged all %d", a["pod"], a["status"], len(acked))
}

// stepVolumeStats reads kubelet's summary of a pod's volume (which kubelet
// gets from the driver's NodeGetVolumeStats) until it shows the capacity
// and at most the available space given.
func stepVolumeStats(ctx context.Context, r *Run, a args) error {
	capacity, avail := mib(a["capacity"]), mib(a["available"])
	what := fmt.Sprintf("kubelet's stats of pod %s's volume to show %s MiB capacity and at most %s MiB available", a["pod"], a["capacity"], a["available"])
	return r.untilVolumeStats(ctx, a["pod"], what, func(v volumeStats) (bool, string) {
		return v.Capacity == capacity && v.Available <= avail,
			fmt.Sprintf("capacity %d, available %d, used %d bytes", v.Capacity, v.Available, v.Used)
	})
}

// untilVolumeStats reads kubelet's stats of pod's volume "data" (its
// summary, through the API server's node proxy) until check holds.
func (r *Run) untilVolumeStats(ctx context.Context, pod, what string, check func(volumeStats) (bool, string)) error {
	cs, err := r.clientset()
	if err != nil {
		return err
	}
	var p corev1.Pod
	if err := r.env.R.Get(ctx, pod, r.ns(), &p); err != nil {
		return err
	}
	return harness.Until(ctx, what, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes/" + p.Spec.NodeName + "/proxy/stats/summary").DoRaw(ctx)
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		v, ok := podVolume(raw, p.Name, "data")
		if !ok {
			return false, "no stats for the pod's volume yet", nil
		}
		done, seen := check(v)
		return done, seen, nil
	})
}

func mib(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n << 20
}

type volumeStats struct {
	Name      string `json:"name"`
	Capacity  int64  `json:"capacityBytes"`
	Available int64  `json:"availableBytes"`
	Used      int64  `json:"usedBytes"`
	// InodesUsed and Time: what kubelet counted, and when it measured.
	InodesUsed int64     `json:"inodesUsed"`
	Time       time.Time `json:"time"`
}

// podVolume finds a pod's volume in kubelet's stats summary.
func podVolume(summary []byte, pod, volume string) (volumeStats, bool) {
	var s struct {
		Pods []struct {
			PodRef struct {
				Name string `json:"name"`
			} `json:"podRef"`
			Volume []volumeStats `json:"volume"`
		} `json:"pods"`
	}
	if json.Unmarshal(summary, &s) != nil {
		return volumeStats{}, false
	}
	for _, p := range s.Pods {
		if p.PodRef.Name != pod {
			continue
		}
		for _, v := range p.Volume {
			if v.Name == volume {
				return v, true
			}
		}
	}
	return volumeStats{}, false
}

// --- the driver's own account ----------------------------------------------

// rpcLine is one call the driver logged: rpcserver writes one line per call.
type rpcLine struct {
	at, method, target, code, text string
}

var (
	klogTime = regexp.MustCompile(`^[IWEF](\d{4} \d{2}:\d{2}:\d{2}\.\d{6})`)
	logField = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)
)

// rpcLines reads every driver container's log on node, current and exited
// (through the node's container runtime), and returns the calls about pv
// in the order they happened.
func (r *Run) rpcLines(ctx context.Context, node, pv string) ([]rpcLine, error) {
	out, err := r.onNode(ctx, node, "sh", "-c", `for id in $(crictl ps -a -q --name '^`+driverContainer+`$' --label io.kubernetes.pod.namespace=`+driverNamespace+`); do crictl logs "$id" 2>&1; done`)
	if err != nil {
		return nil, err
	}
	return parseRPCLines(out, pv), nil
}

// parseRPCLines picks the calls about pv out of driver logs, in time order.
func parseRPCLines(out, pv string) []rpcLine {
	var calls []rpcLine
	for line := range strings.Lines(out) {
		at := klogTime.FindStringSubmatch(line)
		if at == nil || !strings.Contains(line, `"RPC`) {
			continue
		}
		f := map[string]string{}
		for _, m := range logField.FindAllStringSubmatch(line, -1) {
			f[m[1]] = m[2]
		}
		if f["volume_id"] != pv {
			continue
		}
		calls = append(calls, rpcLine{at: at[1], method: f["method"], target: f["target_path"], code: f["code"], text: strings.TrimSpace(line)})
	}
	slices.SortStableFunc(calls, func(a, b rpcLine) int { return strings.Compare(a.at, b.at) })
	return calls
}

// unrecovered lists the mount calls (publish, unpublish) that were the last
// for their method and target and ended in an error other than a
// deliberate refusal.
func unrecovered(calls []rpcLine) []rpcLine {
	last := map[string]rpcLine{}
	var order []string
	for _, l := range calls {
		if !strings.HasSuffix(l.method, "/NodePublishVolume") && !strings.HasSuffix(l.method, "/NodeUnpublishVolume") {
			continue
		}
		k := l.method + " " + l.target
		if _, ok := last[k]; !ok {
			order = append(order, k)
		}
		last[k] = l
	}
	var out []rpcLine
	for _, k := range order {
		if l := last[k]; l.code != "OK" && l.code != "FailedPrecondition" {
			out = append(out, l)
		}
	}
	return out
}

// stepDriversRecovered checks the driver's own account on every node: for
// each mount target of the scenario's volume, the last publish or unpublish
// the driver answered either succeeded or was a deliberate refusal
// (FailedPrecondition: the copy is held, the volume is being deleted).
// Any other last answer (Unavailable, Internal, ...) is an error the driver
// did not recover from.
func stepDriversRecovered(ctx context.Context, r *Run, _ args) error {
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return err
	}
	var stuck []string
	calls := 0
	for _, n := range nodes.Items {
		lines, err := r.rpcLines(ctx, n.Name, r.vars["pv"])
		if err != nil {
			return fmt.Errorf("read the driver's log on %s: %w", n.Name, err)
		}
		calls += len(lines)
		for _, l := range unrecovered(lines) {
			stuck = append(stuck, n.Name+": "+l.text)
		}
	}
	r.t.Logf("the drivers logged %d calls about %s", calls, r.vars["pv"])
	if len(stuck) > 0 {
		slices.Sort(stuck)
		return fmt.Errorf("expected every call about %s to end in success or a refusal; the last answer for these targets was an error:\n%s",
			r.vars["pv"], strings.Join(stuck, "\n"))
	}
	if calls == 0 {
		return fmt.Errorf("no driver logged a call about %s: the log was not read", r.vars["pv"])
	}
	return nil
}

// stepKeepMountBusy starts a process on the pod's node whose working
// directory is the pod's mount of the copy, for the given time: until it
// ends, unmounting that target fails with EBUSY, as it would while
// something on the node still uses the old pod's mount.
func stepKeepMountBusy(ctx context.Context, r *Run, a args) error {
	d, err := time.ParseDuration(a["duration"])
	if err != nil {
		return err
	}
	var p corev1.Pod
	if err := r.env.R.Get(ctx, a["pod"], r.ns(), &p); err != nil {
		return err
	}
	target := podTarget(p.UID, r.vars["pv"])
	// The spell ends no earlier than d after now (the process starts later).
	r.vars["_busy_uid_"+p.Name], r.marks["busy until "+p.Name] = string(p.UID), time.Now().Add(d)
	if _, err := harness.Run(ctx, r.env.Repo, "docker", "exec", "-d", p.Spec.NodeName, "sh", "-c",
		fmt.Sprintf("cd %s && exec sleep %d", target, int(d.Seconds()))); err != nil {
		return err
	}
	return harness.Until(ctx, "a process in "+target, deadline(ctx), func(ctx context.Context) (bool, string, error) {
		out, err := r.onNode(ctx, p.Spec.NodeName, "sh", "-c", "for d in /proc/[0-9]*; do [ \"$(readlink $d/cwd)\" = \""+target+"\" ] && echo ${d#/proc/}; done; true")
		return strings.TrimSpace(out) != "", fmt.Sprint(err), nil
	})
}
