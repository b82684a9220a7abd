// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package scenario

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"liken.sh/per-node/e2e/internal/harness"
)

// The NATS example (docs/examples/nats): its stream, and the label of its
// pods.
const (
	natsStream = "ORDERS"
	natsApp    = "nats"
)

// stepApplyExample builds the kustomization at path, as kubectl apply -k
// does, and applies it in the scenario's namespace: every namespaced object
// moves there and the PersistentVolume's claimRef with it, as an operator
// who installs the example in another namespace edits it; the example's
// Namespace object is left out.
func stepApplyExample(ctx context.Context, r *Run, a args) error {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(r.env.Repo, a["path"]))
	if err != nil {
		return fmt.Errorf("build the kustomization %s: %w", a["path"], err)
	}
	raw, err := m.AsYaml()
	if err != nil {
		return err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				break
			}
			return fmt.Errorf("%s: %w", a["path"], err)
		}
		switch {
		case len(u.Object) == 0, u.GetKind() == "Namespace":
			continue
		case u.GetKind() == "PersistentVolume":
			if err := unstructured.SetNestedField(u.Object, r.ns(), "spec", "claimRef", "namespace"); err != nil {
				return err
			}
		case u.GetNamespace() != "":
			u.SetNamespace(r.ns())
		}
		if u.GetKind() == "Deployment" {
			sel, _, err := unstructured.NestedStringMap(u.Object, "spec", "selector", "matchLabels")
			if err != nil || len(sel) == 0 {
				return fmt.Errorf("%s: Deployment %s selects its pods by no matchLabels", a["path"], u.GetName())
			}
			// The store steps (pick a store pod, evict, drain) act on the
			// example's pods from now on.
			r.store = labels.SelectorFromSet(sel).String()
		}
		objs = append(objs, u)
	}
	return r.apply(ctx, objs)
}

// natsPods lists the example's pods.
func (r *Run) natsPods(ctx context.Context) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.listIn(ctx, r.ns(), &pods, "app="+natsApp, ""); err != nil {
		return nil, harness.Unobserved(err)
	}
	return pods.Items, nil
}

// natsPodOn is the running NATS pod on node.
func (r *Run) natsPodOn(ctx context.Context, node string) (*corev1.Pod, error) {
	pods, err := r.natsPods(ctx)
	if err != nil {
		return nil, err
	}
	for i := range pods {
		if pods[i].Spec.NodeName == node && pods[i].DeletionTimestamp == nil && pods[i].Status.Phase == corev1.PodRunning {
			return &pods[i], nil
		}
	}
	return nil, harness.Unobserved(fmt.Errorf("no running NATS pod on %s", node))
}

// natscheck runs natscheck in pod and decodes the JSON it printed into out.
func (r *Run) natscheck(ctx context.Context, pod string, out any, args ...string) error {
	var stdout, stderr bytes.Buffer
	cmd := append([]string{"/natscheck"}, args...)
	if err := r.env.R.ExecInPod(ctx, r.ns(), pod, "nats", cmd, &stdout, &stderr); err != nil {
		return fmt.Errorf("exec %v in %s: %w: %s", cmd, pod, err, strings.TrimSpace(stderr.String()))
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(stdout.Bytes(), out); err != nil {
		return fmt.Errorf("%v in %s printed %q: %w", cmd, pod, stdout.String(), err)
	}
	return nil
}

// stepNatsAcknowledges writes n messages through a ready NATS pod and
// requires NATS to acknowledge each; the highest acknowledged sequence is
// kept ($nats_acked) for the checks of what each server holds.
func stepNatsAcknowledges(ctx context.Context, r *Run, a args) error {
	n, err := strconv.Atoi(a["n"])
	if err != nil {
		return err
	}
	pods, err := r.natsPods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if !harness.PodReady(&p) {
			continue
		}
		var ack struct {
			Acked int    `json:"acked"`
			Last  uint64 `json:"last"`
		}
		if err := r.natscheck(ctx, p.Name, &ack, "write", natsStream, a["n"]); err != nil {
			return err
		}
		if ack.Acked != n {
			return fmt.Errorf("NATS acknowledged %d of %d messages", ack.Acked, n)
		}
		r.vars["nats_acked"] = strconv.FormatUint(ack.Last, 10)
		return nil
	}
	return harness.Unobserved(fmt.Errorf("no ready NATS pod to write through"))
}

// natsAcked is the highest sequence NATS acknowledged so far.
func (r *Run) natsAcked() (uint64, error) {
	want, err := strconv.ParseUint(r.vars["nats_acked"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("no message acknowledged yet ($nats_acked %q)", r.vars["nats_acked"])
	}
	return want, nil
}

// stepNatsHoldsAll waits until the NATS server on node holds, in its own
// copy (its /jsz), every message acknowledged so far.
func stepNatsHoldsAll(ctx context.Context, r *Run, a args) error {
	want, err := r.natsAcked()
	if err != nil {
		return err
	}
	return harness.Until(ctx, "the NATS server on "+a["node"]+" to hold every acknowledged message", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			p, err := r.natsPodOn(ctx, a["node"])
			if err != nil {
				return false, "", err
			}
			return r.natsHolds(ctx, p.Name, want)
		})
}

// natsHeld is the stream as one NATS server holds it in its own copy.
type natsHeld struct {
	Messages uint64 `json:"messages"`
	LastSeq  uint64 `json:"last_seq"`
}

// natsLocal asks the NATS server in pod for its own copy of the stream
// (its /jsz).
func (r *Run) natsLocal(ctx context.Context, pod string) (natsHeld, error) {
	var held natsHeld
	if err := r.natscheck(ctx, pod, &held, "local", natsStream); err != nil {
		return held, harness.Unobserved(err)
	}
	return held, nil
}

// natsHolds asks the NATS server in pod for its own copy of the stream
// (its /jsz): done when it holds every message up to sequence want. The
// stream's messages are never deleted, so holding as many messages as the
// highest acknowledged sequence leaves no gap below it.
func (r *Run) natsHolds(ctx context.Context, pod string, want uint64) (bool, string, error) {
	held, err := r.natsLocal(ctx, pod)
	if err != nil {
		return false, "", err
	}
	return held.LastSeq >= want && held.Messages >= want,
		fmt.Sprintf("acknowledged up to %d; %s holds %d messages up to %d", want, pod, held.Messages, held.LastSeq), nil
}

// stepNatsHoldsNothing requires the NATS server on node to hold no message
// of the stream in its own copy (its /jsz): a server that started empty.
func stepNatsHoldsNothing(ctx context.Context, r *Run, a args) error {
	return harness.Until(ctx, "the NATS server on "+a["node"]+" to answer what it holds", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			p, err := r.natsPodOn(ctx, a["node"])
			if err != nil {
				return false, "", err
			}
			held, err := r.natsLocal(ctx, p.Name)
			if err != nil {
				return false, "", err
			}
			if held.Messages > 0 || held.LastSeq > 0 {
				return false, "", fmt.Errorf("%w: %s holds %d messages up to %d", harness.ErrNotSeen, p.Name, held.Messages, held.LastSeq)
			}
			return true, "", nil
		})
}

// stepEveryNatsHoldsAll waits until every running NATS server holds, in
// its own copy, every message acknowledged so far.
func stepEveryNatsHoldsAll(ctx context.Context, r *Run, _ args) error {
	want, err := r.natsAcked()
	if err != nil {
		return err
	}
	return harness.Until(ctx, "every NATS server to hold every acknowledged message", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pods, err := r.natsPods(ctx)
			if err != nil {
				return false, "", err
			}
			var seen []string
			for _, p := range pods {
				if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
					continue
				}
				ok, report, err := r.natsHolds(ctx, p.Name, want)
				if err != nil || !ok {
					return false, report, err
				}
				seen = append(seen, p.Name)
			}
			return len(seen) > 0, "no running NATS pod", nil
		})
}

// The writer that runs through a drain: a pod on the control plane (no
// drain evicts it) that writes through the example's client Service until
// it is told to stop, and then prints what NATS acknowledged.
const (
	natsWriter     = "nats-writer"
	natsWriterStop = "/run/writer/stop"
)

// stepStartNatsWriter starts the writer and waits until NATS acknowledged
// its first messages.
func stepStartNatsWriter(ctx context.Context, r *Run, _ args) error {
	never := int64(0)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: natsWriter, Namespace: r.ns()},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &never,
			NodeSelector:                  map[string]string{"node-role.kubernetes.io/control-plane": ""},
			Tolerations:                   []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			Containers: []corev1.Container{{
				Name: "writer", Image: harness.NatsImageName, ImagePullPolicy: corev1.PullIfNotPresent,
				Command:      []string{"/natscheck", "write-until", natsStream, natsWriterStop},
				Env:          []corev1.EnvVar{{Name: "NATS_URL", Value: "nats://" + natsApp + ":4222"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "run", MountPath: "/run/writer"}},
			}},
			Volumes: []corev1.Volume{{Name: "run", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	if err := r.env.R.Create(ctx, pod); err != nil {
		return fmt.Errorf("start the NATS writer: %w", err)
	}
	return harness.Until(ctx, "the NATS writer to run", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := r.env.R.Get(ctx, natsWriter, r.ns(), &p); err != nil {
			return false, "", harness.Unobserved(err)
		}
		if p.Status.Phase != corev1.PodRunning {
			return false, "writer " + string(p.Status.Phase), nil
		}
		var ack natsAck
		if err := r.writerLog(ctx, &ack); err != nil {
			return false, err.Error(), nil
		}
		return ack.Acked > 0, fmt.Sprintf("writer running, %d acknowledged", ack.Acked), nil
	})
}

// natsAck is what natscheck prints of NATS' acknowledgements.
type natsAck struct {
	Acked   int     `json:"acked"`
	First   uint64  `json:"first"`
	Last    uint64  `json:"last"`
	Retried int     `json:"retried"`
	Longest float64 `json:"longest_wait_seconds"`
}

// writerLog decodes the last line the writer printed.
func (r *Run) writerLog(ctx context.Context, out *natsAck) error {
	raw, err := r.podLogs(ctx, natsWriter, "writer")
	if err != nil {
		return harness.Unobserved(err)
	}
	lines := strings.Split(raw, "\n")
	last := lines[len(lines)-1]
	if err := json.Unmarshal([]byte(last), out); err != nil {
		return harness.Unobserved(fmt.Errorf("the NATS writer printed %q: %w", last, err))
	}
	return nil
}

// stepStopNatsWriter tells the writer to stop, waits until it has, and
// keeps the highest sequence NATS acknowledged to it ($nats_acked) for the
// checks of what each server holds.
func stepStopNatsWriter(ctx context.Context, r *Run, _ args) error {
	var stdout, stderr bytes.Buffer
	if err := r.env.R.ExecInPod(ctx, r.ns(), natsWriter, "writer", []string{"/natscheck", "stop", natsWriterStop}, &stdout, &stderr); err != nil {
		return fmt.Errorf("stop the NATS writer: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	var ack natsAck
	err := harness.Until(ctx, "the NATS writer to stop", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		var p corev1.Pod
		if err := r.env.R.Get(ctx, natsWriter, r.ns(), &p); err != nil {
			return false, "", harness.Unobserved(err)
		}
		switch p.Status.Phase {
		case corev1.PodFailed:
			raw, _ := r.podLogs(ctx, natsWriter, "writer")
			return false, "", fmt.Errorf("%w: the NATS writer failed: %s", harness.ErrNotSeen, raw)
		case corev1.PodSucceeded:
			return true, "", r.writerLog(ctx, &ack)
		}
		return false, "writer " + string(p.Status.Phase), nil
	})
	if err != nil {
		return err
	}
	if ack.Last < ack.First || ack.Acked == 0 {
		return fmt.Errorf("the NATS writer had nothing acknowledged: %+v", ack)
	}
	r.t.Logf("NATS acknowledged %d messages to the writer (sequences %d to %d; %d tries again; the longest wait for an acknowledgement %.1fs)",
		ack.Acked, ack.First, ack.Last, ack.Retried, ack.Longest)
	r.vars["nats_acked"] = strconv.FormatUint(ack.Last, 10)
	return nil
}

// podLogs is the log of a container of pod.
func (r *Run) podLogs(ctx context.Context, pod, container string) (string, error) {
	cs, err := r.clientset()
	if err != nil {
		return "", err
	}
	raw, err := cs.CoreV1().Pods(r.ns()).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	return strings.TrimSpace(string(raw)), err
}

// stepUncordonAllBut lets the scheduler use every worker but node again.
// A pending pod is placed as soon as one node is uncordoned: uncordoning
// every worker one after another would let it land on the first, not on
// the one it prefers.
func stepUncordonAllBut(ctx context.Context, r *Run, a args) error {
	return r.cordonWorkersBut(ctx, a["node"], false)
}

// restoredLine is what nats-server logs of a stream it read from its disk.
var restoredLine = regexp.MustCompile(`Restored ([0-9,]+) messages for stream '[^']+ > ` + natsStream + `'`)

// stepNatsRestored requires the NATS server on node to have logged that it
// restored n messages of the stream from its copy (the server's own figure).
func stepNatsRestored(ctx context.Context, r *Run, a args) error {
	return harness.Until(ctx, "the NATS server on "+a["node"]+" to restore "+a["n"]+" messages from its copy", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			p, err := r.natsPodOn(ctx, a["node"])
			if err != nil {
				return false, "", err
			}
			logs, err := r.podLogs(ctx, p.Name, "nats")
			if err != nil {
				return false, "", harness.Unobserved(err)
			}
			m := restoredLine.FindStringSubmatch(logs)
			if m == nil {
				return false, p.Name + " logged no restore of " + natsStream, nil
			}
			got := strings.ReplaceAll(m[1], ",", "")
			if got != a["n"] {
				return false, "", fmt.Errorf("%w: %s restored %s messages from its copy, want %s", harness.ErrNotSeen, p.Name, got, a["n"])
			}
			return true, "", nil
		})
}

// stepNatsPeerRemove removes the NATS server named after node from
// JetStream, as docs/examples/nats says, through a ready pod.
func stepNatsPeerRemove(ctx context.Context, r *Run, a args) error {
	pods, err := r.natsPods(ctx)
	if err != nil {
		return err
	}
	for _, p := range pods {
		if harness.PodReady(&p) && p.Spec.NodeName != a["node"] {
			return r.natscheck(ctx, p.Name, nil, "peer-remove", a["node"], "nats://sys:change-me-sys@127.0.0.1:4222")
		}
	}
	return harness.Unobserved(fmt.Errorf("no ready NATS pod to remove %s through", a["node"]))
}

// stepPickNatsPod names a ready NATS pod.
func stepPickNatsPod(ctx context.Context, r *Run, a args) error {
	return harness.Until(ctx, "a ready NATS pod", deadline(ctx), func(ctx context.Context) (bool, string, error) {
		pods, err := r.natsPods(ctx)
		if err != nil {
			return false, "", err
		}
		for i := range pods {
			if harness.PodReady(&pods[i]) {
				r.vars[a["as"]] = pods[i].Name
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("%d NATS pods, none ready", len(pods)), nil
	})
}

// stepWorkerWithoutNats names a worker that runs no NATS pod.
func stepWorkerWithoutNats(ctx context.Context, r *Run, a args) error {
	pods, err := r.natsPods(ctx)
	if err != nil {
		return err
	}
	var nodes corev1.NodeList
	if err := r.env.R.List(ctx, &nodes); err != nil {
		return err
	}
	busy := map[string]bool{}
	for _, p := range pods {
		busy[p.Spec.NodeName] = true
	}
	for _, n := range nodes.Items {
		if _, cp := n.Labels["node-role.kubernetes.io/control-plane"]; !cp && !busy[n.Name] {
			r.vars[a["as"]] = n.Name
			return nil
		}
	}
	return fmt.Errorf("every worker runs a NATS pod")
}

// natsNotReadyFor is how long the NATS pod on a node must be seen running
// and not Ready.
const natsNotReadyFor = 15 * time.Second

// stepNatsNotReady requires the NATS pod scheduled on node (started or
// still starting) to stay not Ready for natsNotReadyFor: it holds no
// current replica of the stream.
func stepNatsNotReady(ctx context.Context, r *Run, a args) error {
	var since time.Time
	return harness.Until(ctx, "the NATS pod on "+a["node"]+" to stay not ready", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			pods, err := r.natsPods(ctx)
			if err != nil {
				return false, "", err
			}
			i := slices.IndexFunc(pods, func(p corev1.Pod) bool {
				return p.Spec.NodeName == a["node"] && p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodFailed
			})
			if i < 0 {
				return false, "", harness.Unobserved(fmt.Errorf("no NATS pod on %s", a["node"]))
			}
			p := &pods[i]
			if harness.PodReady(p) {
				return false, "", fmt.Errorf("%w: %s on %s is Ready", harness.ErrNotSeen, p.Name, a["node"])
			}
			if since.IsZero() {
				since = time.Now()
			}
			return time.Since(since) >= natsNotReadyFor, fmt.Sprintf("%s %s, not ready for %s", p.Name, p.Status.Phase, time.Since(since).Round(time.Second)), nil
		})
}

// stepDeleteNatsPodOn deletes the running NATS pod on node.
func stepDeleteNatsPodOn(ctx context.Context, r *Run, a args) error {
	p, err := r.natsPodOn(ctx, a["node"])
	if err != nil {
		return err
	}
	return r.env.R.Delete(ctx, p)
}
