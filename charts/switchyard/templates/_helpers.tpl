{{/* Chart name, overridable. */}}
{{- define "switchyard.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Prefix of every object name: the release name, plus the chart name unless it is in it already. */}}
{{- define "switchyard.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "switchyard.controller.fullname" -}}
{{- printf "%s-controller" (include "switchyard.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "switchyard.proxy.fullname" -}}
{{- printf "%s-proxy" (include "switchyard.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The proxies' admin Service (admin API and /metrics): never the client Service. */}}
{{- define "switchyard.proxy.adminServiceName" -}}
{{- printf "%s-proxy-admin" (include "switchyard.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "switchyard.controller.metricsServiceName" -}}
{{- printf "%s-controller-metrics" (include "switchyard.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The routing ConfigMap the controller writes and the proxies read, and its credentials Secret. */}}
{{- define "switchyard.routing.configMapName" -}}
{{- default (printf "%s-routing" (include "switchyard.fullname" .)) .Values.routing.configMapName }}
{{- end }}

{{- define "switchyard.routing.secretName" -}}
{{- printf "%s-credentials" (include "switchyard.routing.configMapName" .) }}
{{- end }}

{{- define "switchyard.controller.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create }}
{{- default (include "switchyard.controller.fullname" .) .Values.controller.serviceAccount.name }}
{{- else }}
{{- required "controller.serviceAccount.name is required when controller.serviceAccount.create is false" .Values.controller.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "switchyard.proxy.serviceAccountName" -}}
{{- if .Values.proxy.serviceAccount.create }}
{{- default (include "switchyard.proxy.fullname" .) .Values.proxy.serviceAccount.name }}
{{- else }}
{{- required "proxy.serviceAccount.name is required when proxy.serviceAccount.create is false" .Values.proxy.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* Cluster-scoped objects carry the namespace too: two releases of the same name in two namespaces must not collide. */}}
{{- define "switchyard.controller.clusterRoleName" -}}
{{- printf "%s-%s" (include "switchyard.controller.fullname" .) .Release.Namespace }}
{{- end }}

{{- define "switchyard.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "switchyard.labels" -}}
helm.sh/chart: {{ include "switchyard.chart" . }}
app.kubernetes.io/name: {{ include "switchyard.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: switchyard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* Selector labels of one component: include with (dict "root" $ "component" "proxy"). */}}
{{- define "switchyard.selectorLabels" -}}
app.kubernetes.io/name: {{ include "switchyard.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* All labels of one component's objects. */}}
{{- define "switchyard.componentLabels" -}}
{{ include "switchyard.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "switchyard.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag }}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository $tag }}
{{- end }}
{{- end }}

{{/*
Topology spread constraints of a component, with the component's selector filled in where the
user gave none: include with (dict "root" $ "component" "proxy" "constraints" list).
*/}}
{{- define "switchyard.topologySpread" -}}
{{- $out := list }}
{{- range .constraints }}
{{- $c := deepCopy . }}
{{- if not (hasKey $c "labelSelector") }}
{{- $_ := set $c "labelSelector" (dict "matchLabels" (include "switchyard.selectorLabels" (dict "root" $.root "component" $.component) | fromYaml)) }}
{{- end }}
{{- $out = append $out $c }}
{{- end }}
{{- toYaml $out }}
{{- end }}

{{/*
Rules of the controller's generated RBAC (files/rbac/role.yaml, a copy of config/rbac/role.yaml
that controller-gen writes from the +kubebuilder:rbac markers): include with
(dict "root" $ "kind" "ClusterRole") or "Role". One source for the chart and kustomize.
*/}}
{{- define "switchyard.controller.generatedRules" -}}
{{- $rules := list }}
{{- range $doc := regexSplit "(?m)^---[ \t]*$" (.root.Files.Get "files/rbac/role.yaml") -1 }}
{{- $o := fromYaml $doc }}
{{- if eq (toString (get $o "kind")) $.kind }}
{{- $rules = $o.rules }}
{{- end }}
{{- end }}
{{- if not $rules }}
{{- fail (printf "files/rbac/role.yaml has no %s with rules: copy config/rbac/role.yaml into the chart (make manifests)" .kind) }}
{{- end }}
{{- toYaml $rules }}
{{- end }}

{{/* The proxy's replica floor: replicas, or the autoscaler's minimum. */}}
{{- define "switchyard.proxy.minReplicas" -}}
{{- if .Values.proxy.autoscaling.enabled }}{{ .Values.proxy.autoscaling.minReplicas }}{{ else }}{{ .Values.proxy.replicas }}{{ end }}
{{- end }}

{{/* terminationGracePeriodSeconds of the proxy: longer than the preStop pause plus the drain timeout. */}}
{{- define "switchyard.proxy.terminationGracePeriodSeconds" -}}
{{- $floor := add .Values.proxy.preStopSleepSeconds .Values.proxy.drainTimeoutSeconds }}
{{- if kindIs "invalid" .Values.proxy.terminationGracePeriodSeconds }}
{{- add $floor 15 }}
{{- else if le (int .Values.proxy.terminationGracePeriodSeconds) (int $floor) }}
{{- fail (printf "proxy.terminationGracePeriodSeconds (%v) must be longer than proxy.preStopSleepSeconds + proxy.drainTimeoutSeconds (%d), or in-flight requests are killed before they drain" .Values.proxy.terminationGracePeriodSeconds (int $floor)) }}
{{- else }}
{{- .Values.proxy.terminationGracePeriodSeconds }}
{{- end }}
{{- end }}
