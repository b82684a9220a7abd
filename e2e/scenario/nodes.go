// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"liken.sh/per-node/e2e/internal/harness"
)

// Steps about nodes and the driver on them: restarts, stops, deletions.

func (r *Run) driverPodsOn(ctx context.Context, node string) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := r.listIn(ctx, driverNamespace, &pods, "", "spec.nodeName="+node)
	return pods.Items, err
}

func stepRestartDriver(ctx context.Context, r *Run, a args) error {
	var old corev1.Pod
	// A node that just registered again may still be replacing its pod.
	err := harness.Until(ctx, "one ready driver pod on "+a["node"], deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.driverPodsOn(ctx, a["node"])
		if err != nil {
			return false, "", err
		}
		if len(pods) == 1 && harness.PodReady(&pods[0]) {
			old = pods[0]
			return true, "", nil
		}
		return false, r.driverPodsReport(pods), nil
	})
	if err != nil {
		return err
	}
	if err := r.env.R.Delete(ctx, &old); err != nil {
		return err
	}
	return harness.Until(ctx, "a new ready driver pod on "+a["node"], deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.driverPodsOn(ctx, a["node"])
		if err != nil {
			return false, "", err
		}
		for _, p := range pods {
			if p.UID != old.UID && harness.PodReady(&p) {
				return true, "", nil
			}
		}
		return false, r.driverPodsReport(pods), nil
	})
}

// stepRestartNode restarts a node's kind container and waits until its new
// kubelet has renewed the node's lease, reports Ready, and has said of every
// pod on the node what became of it.
func stepRestartNode(ctx context.Context, r *Run, a args) error {
	if err := r.rememberAddress(ctx, a["node"]); err != nil {
		return err
	}
	since := time.Now()
	if _, err := harness.Run(ctx, r.env.Repo, "docker", "restart", "-t", "10", a["node"]); err != nil {
		return err
	}
	if err := r.sameAddress(ctx, a["node"]); err != nil {
		return err
	}
	if err := r.waitKubelet(ctx, a["node"], since); err != nil {
		return err
	}
	return r.waitNoStaleReady(ctx, a["node"], since)
}

// waitNoStaleReady waits until no pod on node still says it is Ready with a
// container that started before since: the node's kubelet reports Ready
// before it has synced its pods, and until then a pod whose containers died
// with the node keeps the Ready status it had (so "wait deployment … ready"
// would pass at once, and an exec into it would find no container).
func (r *Run) waitNoStaleReady(ctx context.Context, node string, since time.Time) error {
	return harness.Until(ctx, "node "+node+"'s kubelet to report its pods after the restart", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var stale []string
		for _, ns := range []string{r.ns(), driverNamespace} {
			var pods corev1.PodList
			if err := r.listIn(ctx, ns, &pods, "", "spec.nodeName="+node); err != nil {
				return false, "", harness.Unobserved(err)
			}
			stale = append(stale, staleReady(pods.Items, since)...)
		}
		return len(stale) == 0, "Ready with a container from before the restart: " + strings.Join(stale, ", "), nil
	})
}

// staleReady names the pods that say they are Ready while one of their
// containers has been running since before since.
func staleReady(pods []corev1.Pod, since time.Time) []string {
	var out []string
	for i := range pods {
		p := &pods[i]
		if p.DeletionTimestamp != nil || !harness.PodReady(p) {
			continue
		}
		for _, cs := range p.Status.ContainerStatuses {
			if run := cs.State.Running; run != nil && run.StartedAt.Time.Before(since) {
				out = append(out, fmt.Sprintf("pod %s/%s (container %s started %s)", p.Namespace, p.Name, cs.Name, run.StartedAt.UTC().Format(time.TimeOnly)))
				break
			}
		}
	}
	return out
}

// rememberAddress notes the address of a node about to stop.
func (r *Run) rememberAddress(ctx context.Context, node string) error {
	addr, err := harness.NodeAddress(ctx, r.env.Repo, node)
	if err != nil {
		return err
	}
	r.addresses[node] = addr
	return nil
}

// ErrNodeMoved: a node came back at another address than it had. Its cluster
// still routes to the old one, so nothing after it would test the driver.
var ErrNodeMoved = errors.New("the node came back at another address")

// sameAddress fails unless a node that started again is at the address it
// had before it stopped.
func (r *Run) sameAddress(ctx context.Context, node string) error {
	got, err := harness.NodeAddress(ctx, r.env.Repo, node)
	if err != nil {
		return err
	}
	if had, ok := r.addresses[node]; ok && had != got {
		return fmt.Errorf("%w: %s is at %s, had %s: another container on its Docker network took the address while it was stopped",
			ErrNodeMoved, node, got, had)
	}
	return nil
}

// waitKubelet waits until node's kubelet, started after since, has renewed
// the node's lease and reports Ready.
func (r *Run) waitKubelet(ctx context.Context, node string, since time.Time) error {
	return harness.Until(ctx, "node "+node+"'s restarted kubelet to report Ready", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var lease coordinationv1.Lease
		if err := r.env.R.Get(ctx, node, "kube-node-lease", &lease); err != nil {
			return false, "", harness.Unobserved(err)
		}
		renewed := lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(since)
		var n corev1.Node
		if err := r.env.R.Get(ctx, node, "", &n); err != nil {
			return false, "", harness.Unobserved(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return renewed && c.Status == corev1.ConditionTrue, fmt.Sprintf("lease renewed since restart: %v, Ready=%s", renewed, c.Status), nil
			}
		}
		return false, "no Ready condition", nil
	})
}

func stepStopNode(ctx context.Context, r *Run, a args) error {
	if err := r.rememberAddress(ctx, a["node"]); err != nil {
		return err
	}
	r.lists["_stopped"] = append(r.lists["_stopped"], a["node"])
	_, err := harness.Run(ctx, r.env.Repo, "docker", "stop", "-t", "10", a["node"])
	return err
}

func stepStartNode(ctx context.Context, r *Run, a args) error {
	r.lists["_stopped"] = slices.DeleteFunc(r.lists["_stopped"], func(n string) bool { return n == a["node"] })
	since := time.Now()
	if _, err := harness.Run(ctx, r.env.Repo, "docker", "start", a["node"]); err != nil {
		return err
	}
	if err := r.sameAddress(ctx, a["node"]); err != nil {
		return err
	}
	if err := r.waitKubelet(ctx, a["node"], since); err != nil {
		return err
	}
	if err := r.waitNoStaleReady(ctx, a["node"], since); err != nil {
		return err
	}
	// The driver's pod on the node (DaemonSet) must be back too.
	var back []corev1.Pod
	err := harness.Until(ctx, "the driver to run on "+a["node"]+" again", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.driverPodsOn(ctx, a["node"])
		if err != nil {
			return false, "", err
		}
		back = pods
		for _, p := range pods {
			for _, cs := range p.Status.ContainerStatuses {
				if harness.PodReady(&p) && cs.State.Running != nil && cs.State.Running.StartedAt.After(since) {
					return true, "", nil
				}
			}
		}
		return false, r.driverPodsReport(pods), nil
	})
	if err != nil {
		return err
	}
	return r.inPodCIDR(ctx, a["node"], back)
}

// ErrOutsidePodCIDR: a pod has an address its node no longer routes (a
// Node deleted and registered again gets another podCIDR).
var ErrOutsidePodCIDR = errors.New("a pod's address is outside its node's podCIDR")

// inPodCIDR fails unless every pod on the pod network has an address in
// node's podCIDR: the other nodes route only that to it.
func (r *Run) inPodCIDR(ctx context.Context, node string, pods []corev1.Pod) error {
	var n corev1.Node
	if err := r.env.R.Get(ctx, node, "", &n); err != nil {
		return err
	}
	if out := outsidePodCIDR(n.Spec.PodCIDR, pods); len(out) > 0 {
		return fmt.Errorf("%w: node %s has podCIDR %s; %s", ErrOutsidePodCIDR, node, n.Spec.PodCIDR, strings.Join(out, ", "))
	}
	return nil
}

// outsidePodCIDR names the pods, not on the host's network, whose address is
// not in cidr.
func outsidePodCIDR(cidr string, pods []corev1.Pod) []string {
	prefix, err := netip.ParsePrefix(cidr)
	var out []string
	for _, p := range pods {
		if p.Spec.HostNetwork || p.Status.PodIP == "" {
			continue
		}
		addr, aerr := netip.ParseAddr(p.Status.PodIP)
		if err != nil || aerr != nil || !prefix.Contains(addr) {
			out = append(out, fmt.Sprintf("pod %s is at %s", p.Name, p.Status.PodIP))
		}
	}
	return out
}

func (r *Run) driverPodsReport(pods []corev1.Pod) string {
	var s []string
	for _, p := range pods {
		s = append(s, fmt.Sprintf("%s %s ready=%v", p.Name, p.Status.Phase, harness.PodReady(&p)))
	}
	return "driver pods: " + strings.Join(s, ", ")
}

func stepDeleteNode(ctx context.Context, r *Run, a args) error {
	return r.env.R.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: a["node"]}})
}

func stepNoStorePod(ctx context.Context, r *Run, _ args) error {
	return harness.Until(ctx, "every store pod to be gone", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.storePods(ctx)
		if err != nil {
			return false, "", err
		}
		return len(pods) == 0, r.podsReport(ctx), nil
	})
}

func stepPVGone(ctx context.Context, r *Run, a args) error {
	start := time.Now()
	err := harness.Until(ctx, "PersistentVolume "+a["name"]+" to be gone", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var pv corev1.PersistentVolume
		err := r.env.R.Get(ctx, a["name"], "", &pv)
		if apierrors.IsNotFound(err) {
			return true, "", nil
		}
		if err != nil {
			return false, "", harness.Unobserved(err)
		}
		return false, fmt.Sprintf("phase %s, deleting %v, finalizers %v", pv.Status.Phase, pv.DeletionTimestamp != nil, pv.Finalizers), nil
	})
	if err == nil {
		r.t.Logf("PersistentVolume %s gone %s after the step began", a["name"], time.Since(start).Round(10*time.Millisecond))
	}
	return err
}

// stepKillNode kills a node's kind container with SIGKILL: no grace period,
// no unmount, no process told to stop. (The host's page cache survives it:
// see scenarios/28-node-killed-mid-write.md for what this does not test.)
func stepKillNode(ctx context.Context, r *Run, a args) error {
	if err := r.rememberAddress(ctx, a["node"]); err != nil {
		return err
	}
	r.lists["_stopped"] = append(r.lists["_stopped"], a["node"])
	_, err := harness.Run(ctx, r.env.Repo, "docker", "kill", "--signal", "KILL", a["node"])
	return err
}

// stepKillStoreContainer sends SIGKILL to the store process of a pod, from
// its node: the container dies mid-write, the pod and node stay.
func stepKillStoreContainer(ctx context.Context, r *Run, a args) error {
	return r.signalStore(ctx, a["pod"], "KILL")
}

// stepFreezeStoreContainer sends SIGSTOP to the store process of a pod: it
// neither answers nor stops on SIGTERM, and keeps its mount until kubelet
// kills it at the end of its grace period.
func stepFreezeStoreContainer(ctx context.Context, r *Run, a args) error {
	return r.signalStore(ctx, a["pod"], "STOP")
}

func (r *Run) signalStore(ctx context.Context, pod, signal string) error {
	return r.inStoreProcess(ctx, pod, fmt.Sprintf(`kill -%s $pid
echo "sent SIG%s to pid $pid of container $id"`, signal, signal))
}

// inStoreProcess runs a shell script on the node of a store pod, with $id
// and $pid set to its store container and that container's process.
func (r *Run) inStoreProcess(ctx context.Context, pod, script string) error {
	var p corev1.Pod
	if err := r.env.R.Get(ctx, pod, r.ns(), &p); err != nil {
		return err
	}
	script = fmt.Sprintf(`set -e
id=$(crictl ps -q --name '^store$' --label io.kubernetes.pod.name=%s --label io.kubernetes.pod.namespace=%s)
[ -n "$id" ] || { echo "no running store container" >&2; exit 1; }
pid=$(crictl inspect --output go-template --template '{{.info.pid}}' $id)
`, p.Name, p.Namespace) + script
	out, err := r.onNode(ctx, p.Spec.NodeName, "sh", "-c", script)
	r.t.Logf("%s: %s", p.Spec.NodeName, strings.TrimSpace(out))
	return err
}

// stepLeaveNotReadyAfter gives the deployment's pods tolerations of the
// taints a node gets when it stops reporting (not-ready, unreachable) for
// only the given seconds, instead of the default 300.
func stepLeaveNotReadyAfter(ctx context.Context, r *Run, a args) error {
	var tolerations []string
	for _, taint := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		tolerations = append(tolerations, fmt.Sprintf(`{"key":%q,"operator":"Exists","effect":"NoExecute","tolerationSeconds":%s}`, taint, a["seconds"]))
	}
	return r.patchDeployment(ctx, a["name"], `{"spec":{"template":{"spec":{"tolerations":[`+strings.Join(tolerations, ",")+`]}}}}`)
}

func stepNodeNotReady(ctx context.Context, r *Run, a args) error {
	start := time.Now()
	err := harness.Until(ctx, "node "+a["node"]+" to be NotReady", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var n corev1.Node
		if err := r.env.R.Get(ctx, a["node"], "", &n); err != nil {
			return false, "", harness.Unobserved(err)
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status != corev1.ConditionTrue, fmt.Sprintf("Ready=%s (%s); taints %v", c.Status, c.Reason, n.Spec.Taints), nil
			}
		}
		return false, "no Ready condition", nil
	})
	if err == nil {
		r.t.Logf("node %s NotReady %s after the step began", a["node"], time.Since(start).Round(time.Second))
	}
	return err
}

// stepReadyStorePodsCount waits until exactly n store pods that are not
// being deleted are ready (pods stuck terminating on a node that does not
// answer are not counted, nor waited for).
func stepReadyStorePodsCount(ctx context.Context, r *Run, a args) error {
	want, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	return harness.Until(ctx, fmt.Sprintf("%d ready store pods", want), deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.servingStorePods(ctx)
		if err != nil {
			return false, "", err
		}
		return len(pods) == want, r.podsReport(ctx), nil
	})
}
