// Copyright 2026 The per-node Authors.
// SPDX-License-Identifier: Apache-2.0

package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gotest.tools/v3/assert"
	"gotest.tools/v3/golden"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The chart renders as recorded, with its defaults and with every value set
// (UPDATE: go test ./e2e/internal/harness -run ChartGolden -update).
func TestChartGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		flags  []string
	}{
		{"chart-default.golden.yaml", nil},
		{"chart-values.golden.yaml", []string{"--values", "e2e/internal/harness/testdata/chart-values.yaml"}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			out, err := RenderChart(context.Background(), repoRoot(t), tc.flags...)
			assert.NilError(t, err)
			golden.Assert(t, out, tc.golden)
		})
	}
}

// One source of truth in two forms: the chart with its defaults renders the
// same objects as deploy/ (the kustomize base), but for Helm's own labels
// and the Namespace (Helm installs into one: --create-namespace).
func TestChartAndDeployRenderTheSameObjects(t *testing.T) {
	repo := repoRoot(t)
	manifest, err := RenderChart(context.Background(), repo)
	assert.NilError(t, err)
	fromChart, err := Objects(manifest)
	assert.NilError(t, err)
	fromDeploy, err := RenderDeploy(repo, "")
	assert.NilError(t, err)

	chart, deploy := byKindAndName(fromChart), byKindAndName(fromDeploy)
	delete(deploy, "Namespace/per-node-system")
	assert.DeepEqual(t, sortedKeys(chart), sortedKeys(deploy))
	for key, c := range chart {
		if diff := cmp.Diff(withoutHelmLabels(deploy[key]), withoutHelmLabels(c)); diff != "" {
			t.Errorf("%s differs between deploy/ (-) and the chart (+):\n%s", key, diff)
		}
	}
}

// kubeletDir moves every host path the driver uses under it; a digest wins
// over a tag; the admission policy can be left out; a ServiceMonitor needs
// the Service.
func TestChartValues(t *testing.T) {
	ctx := context.Background()
	repo := repoRoot(t)
	out, err := RenderChart(ctx, repo, "--set", "image.repository=per-node.liken.sh/driver", "--set", "kubeletDir=/var/snap/microk8s/common/var/lib/kubelet/",
		"--set", "image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	assert.NilError(t, err)
	objs, err := Objects(out)
	assert.NilError(t, err)
	ds := byKindAndName(objs)["DaemonSet/per-node-node"]
	c := container(t, ds)
	assert.Equal(t, c["image"], "per-node.liken.sh/driver@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")
	for _, a := range c["args"].([]any) {
		if strings.Contains(a.(string), "kubelet") {
			assert.Assert(t, strings.Contains(a.(string), "=/var/snap/microk8s/common/var/lib/kubelet") ||
				strings.Contains(a.(string), "unix:///var/snap/microk8s/common/var/lib/kubelet/"), "arg %q", a)
		}
	}
	for _, m := range c["volumeMounts"].([]any) {
		path := m.(map[string]any)["mountPath"].(string)
		assert.Assert(t, strings.HasPrefix(path, "/var/snap/microk8s/common/var/lib/kubelet/") || path == "/var/lib/per-node.liken.sh", "mountPath %q", path)
	}
	vols, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "volumes")
	for _, v := range vols {
		path, _, _ := unstructured.NestedString(v.(map[string]any), "hostPath", "path")
		assert.Assert(t, strings.HasPrefix(path, "/var/snap/microk8s/common/var/lib/kubelet/") || path == "/var/lib/per-node.liken.sh", "hostPath %q", path)
	}

	out, err = RenderChart(ctx, repo, "--set", "admissionPolicy.enabled=false", "--set", "admissionPolicy.acknowledgeNoPolicies=true")
	assert.NilError(t, err)
	objs, err = Objects(out)
	assert.NilError(t, err)
	for key := range byKindAndName(objs) {
		assert.Assert(t, !strings.HasPrefix(key, "ValidatingAdmissionPolicy"), "rendered %s with the policy off", key)
	}

	_, err = RenderChart(ctx, repo, "--set", "metrics.serviceMonitor.enabled=true")
	assert.ErrorContains(t, err, "metrics.serviceMonitor.enabled needs metrics.service.enabled")
}

func container(t *testing.T, ds *unstructured.Unstructured) map[string]any {
	t.Helper()
	assert.Assert(t, ds != nil, "no DaemonSet")
	cs, _, _ := unstructured.NestedSlice(ds.Object, "spec", "template", "spec", "containers")
	assert.Equal(t, len(cs), 1)
	return cs[0].(map[string]any)
}

func byKindAndName(objs []*unstructured.Unstructured) map[string]*unstructured.Unstructured {
	m := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		m[o.GetKind()+"/"+o.GetName()] = o
	}
	return m
}

func sortedKeys(m map[string]*unstructured.Unstructured) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// helmLabels are the labels only Helm adds.
var helmLabels = []string{"helm.sh/chart", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"}

func withoutHelmLabels(o *unstructured.Unstructured) map[string]any {
	if o == nil {
		return nil
	}
	c := o.DeepCopy()
	labels := c.GetLabels()
	for _, l := range helmLabels {
		delete(labels, l)
	}
	c.SetLabels(labels)
	if len(labels) == 0 {
		unstructured.RemoveNestedField(c.Object, "metadata", "labels")
	}
	return c.Object
}

// The driver writes events about PersistentVolumes only, and those live in
// "default": no cluster-wide role lets its account write events, and the
// one Role that does is in "default" (scenario 20 checks the API server's
// answers on a cluster).
func TestTheDriverMayWriteEventsOnlyInDefault(t *testing.T) {
	manifest, err := RenderChart(context.Background(), repoRoot(t))
	assert.NilError(t, err)
	objs, err := Objects(manifest)
	assert.NilError(t, err)
	var roles []string
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
		for _, r := range rules {
			resources, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resources")
			if slices.Contains(resources, "events") {
				roles = append(roles, o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName())
			}
		}
	}
	assert.DeepEqual(t, roles, []string{"Role/default/per-node-node-events"})
}

// values.schema.json refuses a value the chart cannot mean, and a misspelt
// key, before anything renders (helm lint, template and install all check it).
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ set, names string }{
		{"logFormat=JSON", "/logFormat"},
		{"logFormt=json", "logFormt"},
		{"statsTTL=5 minutes", "/statsTTL"},
		{"forgetGoneNodesAfter=-1h", "/forgetGoneNodesAfter"},
		{"maxUnavailable=0", "/maxUnavailable"},
		{"updateStrategy=Recreate", "/updateStrategy"},
		{"image.pullPolicy=always", "/image/pullPolicy"},
		{"metrics.serviceMonitor.enable=true", "enable"},
		{"image.repository=", "image.repository is required"},
		{"serviceAccount.create=false", "serviceAccount.name is required"},
		{"image.repository=r,admissionPolicy.enabled=false", "admissionPolicy.acknowledgeNoPolicies=true"},
		{"admissionPolicy.acknowledgeNoPolicies=yes", "/admissionPolicy/acknowledgeNoPolicies"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			_, err := RenderChart(context.Background(), repoRoot(t), "--set", tc.set)
			assert.ErrorContains(t, err, tc.names)
		})
	}
}

// The pods' and the container's securityContext take what cannot break the
// driver (a seccomp profile here), the container stays privileged with a
// read-only root; init and extra containers go beside the driver.
func TestChartSecurityContextsAndMoreContainers(t *testing.T) {
	out, err := RenderChart(context.Background(), repoRoot(t), "--set", "image.repository=r",
		"--set", "podSecurityContext.seccompProfile.type=RuntimeDefault",
		"--set", "securityContext.seLinuxOptions.type=spc_t",
		"--set", "initContainers[0].name=wait,initContainers[0].image=busybox",
		"--set", "extraContainers[0].name=sidecar,extraContainers[0].image=busybox")
	assert.NilError(t, err)
	objs, err := Objects(out)
	assert.NilError(t, err)
	ds := byKindAndName(objs)["DaemonSet/per-node-node"]
	pod, _, _ := unstructured.NestedMap(ds.Object, "spec", "template", "spec")
	assert.DeepEqual(t, pod["securityContext"], map[string]any{"seccompProfile": map[string]any{"type": "RuntimeDefault"}})
	sc := pod["containers"].([]any)[0].(map[string]any)["securityContext"].(map[string]any)
	assert.Equal(t, sc["privileged"], true)
	assert.Equal(t, sc["readOnlyRootFilesystem"], true)
	assert.DeepEqual(t, sc["seLinuxOptions"], map[string]any{"type": "spc_t"})
	names := func(key string) (n []string) {
		for _, c := range pod[key].([]any) {
			n = append(n, c.(map[string]any)["name"].(string))
		}
		return n
	}
	assert.DeepEqual(t, names("initContainers"), []string{"wait"})
	assert.DeepEqual(t, names("containers"), []string{"driver", "sidecar"})

	for _, set := range []string{"securityContext.privileged=false", "securityContext.readOnlyRootFilesystem=false",
		"podSecurityContext.runAsNonRoot=true", "extraContainers[0].name=x"} {
		_, err := RenderChart(context.Background(), repoRoot(t), "--set", "image.repository=r", "--set", set)
		assert.ErrorContains(t, err, "values don't meet the specifications of the schema", "%s was taken", set)
	}
}

// networkPolicy (off by default) admits the peers of metricsFrom, on the
// health and metrics port only; with none, nothing but the node.
func TestChartNetworkPolicyAdmitsOnlyTheScraper(t *testing.T) {
	ctx, repo := context.Background(), repoRoot(t)
	out, err := RenderChart(ctx, repo, "--set", "image.repository=r")
	assert.NilError(t, err)
	assert.Assert(t, !strings.Contains(out, "kind: NetworkPolicy"), "a NetworkPolicy by default")

	out, err = RenderChart(ctx, repo, "--set", "image.repository=r", "--set", "networkPolicy.enabled=true",
		"--set", "networkPolicy.metricsFrom[0].namespaceSelector.matchLabels.name=monitoring")
	assert.NilError(t, err)
	objs, err := Objects(out)
	assert.NilError(t, err)
	np := byKindAndName(objs)["NetworkPolicy/per-node-node"]
	assert.Assert(t, np != nil, "no NetworkPolicy with networkPolicy.enabled")
	ingress, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	assert.Equal(t, len(ingress), 1)
	rule := ingress[0].(map[string]any)
	assert.DeepEqual(t, rule["from"], []any{map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"name": "monitoring"}}}})
	assert.DeepEqual(t, rule["ports"], []any{map[string]any{"port": "healthz", "protocol": "TCP"}})

	out, err = RenderChart(ctx, repo, "--set", "image.repository=r", "--set", "networkPolicy.enabled=true")
	assert.NilError(t, err)
	objs, err = Objects(out)
	assert.NilError(t, err)
	ingress, found, _ := unstructured.NestedSlice(byKindAndName(objs)["NetworkPolicy/per-node-node"].Object, "spec", "ingress")
	assert.Assert(t, found && len(ingress) == 0, "with no metricsFrom, ingress %v: want none", ingress)
}

// The project's repository URL is set in one place, Chart.yaml's home: the
// alerts' runbook links derive from it (or from
// metrics.prometheusRule.runbookURL), and every other mention (the chart's
// sources, the image's source label, the kustomize component) is the same.
func TestTheRepositoryURLIsSetInOnePlace(t *testing.T) {
	repo := repoRoot(t)
	raw, err := os.ReadFile(filepath.Join(repo, "charts/per-node/Chart.yaml"))
	assert.NilError(t, err)
	var chart struct {
		Home    string   `json:"home"`
		Sources []string `json:"sources"`
	}
	assert.NilError(t, yaml.Unmarshal(raw, &chart))
	assert.Assert(t, strings.HasPrefix(chart.Home, "https://"), "Chart.yaml's home %q", chart.Home)
	assert.DeepEqual(t, chart.Sources, []string{chart.Home})
	docker, err := os.ReadFile(filepath.Join(repo, "Dockerfile"))
	assert.NilError(t, err)
	assert.Assert(t, strings.Contains(string(docker), `org.opencontainers.image.source="`+chart.Home+`"`), "the Dockerfile's source label is not %s", chart.Home)

	out, err := RenderChart(context.Background(), repo, "--set", "image.repository=r", "--set", "metrics.prometheusRule.enabled=true")
	assert.NilError(t, err)
	links := regexp.MustCompile(`runbook_url: (\S+)#`).FindAllStringSubmatch(out, -1)
	assert.Assert(t, len(links) > 0, "no runbook_url rendered")
	for _, l := range links {
		assert.Equal(t, l[1], chart.Home+"/blob/main/docs/runbooks.md")
	}
	// A fork that changes home alone has its own links.
	fork := filepath.Join(t.TempDir(), "per-node")
	assert.NilError(t, exec.Command("cp", "-r", Chart(repo), fork).Run())
	forked := strings.ReplaceAll(string(raw), chart.Home, "https://example.com/fork/per-node")
	assert.NilError(t, os.WriteFile(filepath.Join(fork, "Chart.yaml"), []byte(forked), 0o644))
	out, err = Helm(context.Background(), repo, "template", "per-node", fork, "--set", "image.repository=r", "--set", "metrics.prometheusRule.enabled=true")
	assert.NilError(t, err)
	assert.Assert(t, strings.Count(out, "runbook_url: https://example.com/fork/per-node/blob/main/docs/runbooks.md#") == len(links),
		"the runbook links do not follow Chart.yaml's home")
	out, err = RenderChart(context.Background(), repo, "--set", "image.repository=r", "--set", "metrics.prometheusRule.enabled=true",
		"--set", "metrics.prometheusRule.runbookURL=https://wiki.example.com/per-node")
	assert.NilError(t, err)
	assert.Assert(t, strings.Count(out, "runbook_url: https://wiki.example.com/per-node#") == len(links), "runbookURL not used by every alert")

	// No file names another repository of the project.
	other := regexp.MustCompile(`https://github\.com/[\w.-]+/per-node\b`)
	for _, f := range repoFiles(t, repo) {
		b, err := os.ReadFile(filepath.Join(repo, f))
		if err != nil {
			continue
		}
		for _, m := range other.FindAllString(string(b), -1) {
			assert.Equal(t, m, chart.Home, "%s names the repository %s; Chart.yaml's home is %s", f, m, chart.Home)
		}
	}
}

// The chart's README lists every value with its default and its comment,
// generated from values.yaml (UPDATE=1 go test ./e2e/internal/harness -run
// ChartReadme rewrites it).
func TestChartReadmeIsGeneratedFromValues(t *testing.T) {
	const start, end = "<!-- values: generated from values.yaml by TestChartReadmeIsGeneratedFromValues -->\n", "<!-- end of values -->"
	dir := filepath.Join(repoRoot(t), "charts", "per-node")
	values, err := os.ReadFile(filepath.Join(dir, "values.yaml"))
	assert.NilError(t, err)
	table, err := ValuesTable(values)
	assert.NilError(t, err)
	path := filepath.Join(dir, "README.md")
	readme, err := os.ReadFile(path)
	assert.NilError(t, err)
	before, rest, ok := strings.Cut(string(readme), start)
	assert.Assert(t, ok, "charts/per-node/README.md has no line %q", start)
	_, after, ok := strings.Cut(rest, end)
	assert.Assert(t, ok, "charts/per-node/README.md has no line %q", end)
	want := before + start + table + end + after
	if os.Getenv("UPDATE") != "" {
		assert.NilError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	assert.Equal(t, string(readme), want, "charts/per-node/README.md is stale: run UPDATE=1 go test ./e2e/internal/harness -run ChartReadme")
}

// The kustomize monitoring component and the chart's monitoring values are
// one source of truth in two forms: deploy/ with the component renders the
// chart's PodMonitor and PrometheusRule (defaults, both enabled), but for
// Helm's own labels.
func TestMonitoringComponentIsTheCharts(t *testing.T) {
	repo := repoRoot(t)
	manifest, err := RenderChart(context.Background(), repo, "--set", "metrics.podMonitor.enabled=true", "--set", "metrics.prometheusRule.enabled=true")
	assert.NilError(t, err)
	fromChart, err := Objects(manifest)
	assert.NilError(t, err)
	fromKustomize, err := RenderKustomization(filepath.Join(repo, "e2e", "internal", "harness", "testdata", "monitoring-overlay"), "")
	assert.NilError(t, err)
	chart, kustomize := byKindAndName(fromChart), byKindAndName(fromKustomize)
	for _, key := range []string{"PodMonitor/per-node", "PrometheusRule/per-node"} {
		assert.Assert(t, chart[key] != nil, "the chart renders no %s", key)
		assert.Assert(t, kustomize[key] != nil, "the component renders no %s", key)
		if diff := cmp.Diff(withoutHelmLabels(kustomize[key]), withoutHelmLabels(chart[key])); diff != "" {
			t.Errorf("%s differs between deploy/components/monitoring (-) and the chart (+):\n%s", key, diff)
		}
	}
}

// The driver's account may do what the driver does, and nothing more
// (docs/security.md, "What it may do in the API"): each grant below names
// the code that uses it. A verb, resource or namespace added to the roles
// in the chart or in deploy/ fails here until the driver uses it.
func TestTheDriversRolesGrantOnlyWhatItUses(t *testing.T) {
	want := []string{
		// reclaim: the watch of each PV this node holds (list, watch, by
		// name), the janitor's list of their metadata (list), the fresh read
		// before a record is trusted (get), the finalizer
		// per-node.liken.sh/copies (patch).
		"ClusterRole/per-node-node: persistentvolumes get,list,patch,watch",
		// reclaim: the records themselves: this node's Copy (create), the
		// informer of its own (list, watch), a PV's Copies (list), its own
		// and gone nodes' deleted (delete, and deletecollection for many).
		"ClusterRole/per-node-node: per-node.liken.sh/copies create,delete,deletecollection,list,watch",
		// reclaim: the Node informer (list, watch) and the fresh read that
		// confirms a node is gone (get); copylabels: its own Node's labels
		// (patch).
		"ClusterRole/per-node-node: nodes get,list,patch,watch",
		// kube: the event recorder creates and patches events of PVs,
		// which live in default.
		"Role/default/per-node-node-events: events create,patch",
		// reclaim's janitor, by election: the one Lease per-node-janitor in
		// the driver's namespace, created by the first candidate (create:
		// RBAC cannot name an object not yet made) and read and renewed by
		// each (get, update).
		"Role/per-node-system/per-node-node-janitor: coordination.k8s.io/leases create",
		"Role/per-node-system/per-node-node-janitor: coordination.k8s.io/leases get,update names per-node-janitor",
	}
	repo := repoRoot(t)
	manifest, err := RenderChart(context.Background(), repo)
	assert.NilError(t, err)
	fromChart, err := Objects(manifest)
	assert.NilError(t, err)
	fromDeploy, err := RenderDeploy(repo, "")
	assert.NilError(t, err)
	sort.Strings(want)
	for name, objs := range map[string][]*unstructured.Unstructured{"the chart": fromChart, "deploy/": fromDeploy} {
		assert.DeepEqual(t, grants(t, objs), want)
		t.Logf("%s grants only what the driver uses", name)
	}
}

// grants lists each rule of the roles as "Kind/[namespace/]name: resources
// verbs", with the API group when it is not the core one.
func grants(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "Role" {
			continue
		}
		who := o.GetKind() + "/" + o.GetName()
		if ns := o.GetNamespace(); ns != "" {
			who = o.GetKind() + "/" + ns + "/" + o.GetName()
		}
		rules, _, err := unstructured.NestedSlice(o.Object, "rules")
		assert.NilError(t, err)
		for _, r := range rules {
			rule := r.(map[string]any)
			groups, _, _ := unstructured.NestedStringSlice(rule, "apiGroups")
			resources, _, _ := unstructured.NestedStringSlice(rule, "resources")
			verbs, _, _ := unstructured.NestedStringSlice(rule, "verbs")
			sort.Strings(verbs)
			names, _, _ := unstructured.NestedStringSlice(rule, "resourceNames")
			g := strings.Join(groups, ",")
			if g != "" {
				g += "/"
			}
			line := who + ": " + g + strings.Join(resources, ",") + " " + strings.Join(verbs, ",")
			if len(names) > 0 {
				line += " names " + strings.Join(names, ",")
			}
			out = append(out, line)
		}
	}
	sort.Strings(out)
	return out
}

// The FlowSchema catches the account the drivers run as, wherever the
// chart puts it, and sends it to the chart's own priority level; it can be
// turned off.
func TestTheFlowSchemaCatchesTheDriversAccount(t *testing.T) {
	ctx := context.Background()
	repo := repoRoot(t)
	for _, tc := range []struct {
		name  string
		flags []string
		want  bool
	}{
		{"defaults", nil, true},
		{"another namespace, account and name", []string{"--set", "namespaceOverride=storage",
			"--set", "serviceAccount.name=csi-per-node", "--set", "fullnameOverride=pn"}, true},
		{"turned off", []string{"--set", "apiPriority.enabled=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := RenderChart(ctx, repo, tc.flags...)
			assert.NilError(t, err)
			objs, err := Objects(out)
			assert.NilError(t, err)
			var ds, fs, level *unstructured.Unstructured
			for _, o := range objs {
				switch o.GetKind() {
				case "DaemonSet":
					ds = o
				case "FlowSchema":
					fs = o
				case "PriorityLevelConfiguration":
					level = o
				}
			}
			assert.Assert(t, ds != nil)
			if !tc.want {
				assert.Assert(t, fs == nil && level == nil, "rendered APF objects with apiPriority.enabled=false")
				return
			}
			assert.Assert(t, fs != nil && level != nil, "no FlowSchema or priority level rendered")
			sa, _, _ := unstructured.NestedString(ds.Object, "spec", "template", "spec", "serviceAccountName")
			rules, _, _ := unstructured.NestedSlice(fs.Object, "spec", "rules")
			assert.Equal(t, len(rules), 1)
			subjects, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "subjects")
			assert.Equal(t, len(subjects), 1)
			got, _, _ := unstructured.NestedStringMap(subjects[0].(map[string]any), "serviceAccount")
			assert.DeepEqual(t, got, map[string]string{"name": sa, "namespace": ds.GetNamespace()})
			ref, _, _ := unstructured.NestedString(fs.Object, "spec", "priorityLevelConfiguration", "name")
			assert.Equal(t, ref, level.GetName())
			prec, _, _ := unstructured.NestedInt64(fs.Object, "spec", "matchingPrecedence")
			assert.Assert(t, prec < 9000, "matchingPrecedence %d: the built-in service-accounts schema (9000) would take the requests first", prec)
		})
	}
}

// The suite's image tags are an image ID's first 12 hex digits, which are
// now and then all decimal digits (838616874289 was, on 2026-12-06): the
// chart still gets a string, and renders that image.
func TestAnImageTagOfDigitsIsATag(t *testing.T) {
	const image = "per-node.liken.sh/driver:838616874289"
	flags, err := ImageValues(image)
	assert.NilError(t, err)
	out, err := RenderChart(context.Background(), repoRoot(t), flags...)
	assert.NilError(t, err, "the chart refused the image values %v", flags)
	assert.Assert(t, strings.Contains(out, "image: "+image), "the chart does not run %s", image)
}
