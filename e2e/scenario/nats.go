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
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// stepNatsHoldsAll waits until the NATS server on node holds, in its own
// copy (its /jsz), every message acknowledged so far.
func stepNatsHoldsAll(ctx context.Context, r *Run, a args) error {
	want, err := strconv.ParseUint(r.vars["nats_acked"], 10, 64)
	if err != nil {
		return fmt.Errorf("no message acknowledged yet ($nats_acked %q)", r.vars["nats_acked"])
	}
	return harness.Until(ctx, "the NATS server on "+a["node"]+" to hold every acknowledged message", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			p, err := r.natsPodOn(ctx, a["node"])
			if err != nil {
				return false, "", err
			}
			var held struct {
				Messages uint64 `json:"messages"`
				LastSeq  uint64 `json:"last_seq"`
			}
			if err := r.natscheck(ctx, p.Name, &held, "local", natsStream); err != nil {
				return false, "", harness.Unobserved(err)
			}
			return held.LastSeq >= want && held.Messages >= want,
				fmt.Sprintf("acknowledged up to %d; %s holds %d messages up to %d", want, p.Name, held.Messages, held.LastSeq), nil
		})
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
			cs, err := r.clientset()
			if err != nil {
				return false, "", err
			}
			raw, err := cs.CoreV1().Pods(r.ns()).GetLogs(p.Name, &corev1.PodLogOptions{Container: "nats"}).DoRaw(ctx)
			logs := string(raw)
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

// stepNatsNotReady requires the NATS pod on node to run and stay not Ready
// for natsNotReadyFor: it holds no current replica of the stream.
func stepNatsNotReady(ctx context.Context, r *Run, a args) error {
	var since time.Time
	return harness.Until(ctx, "the NATS pod on "+a["node"]+" to stay not ready", deadline(ctx),
		func(ctx context.Context) (bool, string, error) {
			p, err := r.natsPodOn(ctx, a["node"])
			if err != nil {
				return false, "", err
			}
			if harness.PodReady(p) {
				return false, "", fmt.Errorf("%w: %s on %s is Ready", harness.ErrNotSeen, p.Name, a["node"])
			}
			if since.IsZero() {
				since = time.Now()
			}
			return time.Since(since) >= natsNotReadyFor, fmt.Sprintf("%s running, not ready for %s", p.Name, time.Since(since).Round(time.Second)), nil
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
