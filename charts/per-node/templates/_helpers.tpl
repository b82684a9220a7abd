{{/* The chart's name. */}}
{{- define "per-node.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name: the release name, or release-chart. */}}
{{- define "per-node.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "per-node.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "per-node.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* The node plugin's name: DaemonSet, ServiceAccount, ClusterRole. */}}
{{- define "per-node.nodeName" -}}
{{- printf "%s-node" (include "per-node.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Selector labels. A CSI driver's name is cluster-wide, so one release runs
per cluster: the selector names the driver, not the release, and is the same
as deploy/'s (a cluster can move from kustomize to Helm).
*/}}
{{- define "per-node.selectorLabels" -}}
app.kubernetes.io/name: {{ include "per-node.name" . }}
app.kubernetes.io/component: node
{{- end }}

{{/* Labels of every object. */}}
{{- define "per-node.labels" -}}
app.kubernetes.io/name: {{ include "per-node.name" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The driver image: repository@digest, or repository:tag (appVersion by default). */}}
{{- define "per-node.image" -}}
{{- $repo := required "image.repository is required: the driver image's repository (values.yaml names the one each release is pushed to)" .Values.image.repository }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" $repo .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" $repo (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The namespace of the driver's objects. */}}
{{- define "per-node.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The driver's ServiceAccount. */}}
{{- define "per-node.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "per-node.nodeName" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Where the alerts' runbooks are: metrics.prometheusRule.runbookURL, or
docs/runbooks.md in the chart's home (Chart.yaml: the repository's one URL).
*/}}
{{- define "per-node.runbooks" -}}
{{- default (printf "%s/blob/main/docs/runbooks.md" .Chart.Home) .Values.metrics.prometheusRule.runbookURL -}}
{{- end }}
