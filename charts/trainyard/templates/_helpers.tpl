{{/* The name of the operator's objects: trainyard-operator, as `trainyard install` names them. */}}
{{- define "trainyard.fullname" -}}
{{- default "trainyard-operator" .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels that select the operator's pods; the same as `trainyard install`'s. */}}
{{- define "trainyard.selectorLabels" -}}
app.kubernetes.io/name: trainyard
app.kubernetes.io/component: operator
{{- end }}

{{/* Labels of every object. */}}
{{- define "trainyard.labels" -}}
{{ include "trainyard.selectorLabels" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The trainyard image. */}}
{{- define "trainyard.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{/* The resources of the generated rules that are cluster-wide (internal/install/rbac.go), as a JSON list. */}}
{{- define "trainyard.clusterResources" -}}
["nodes", "tokenreviews", "subjectaccessreviews", "endpointslices", "resourceflavors", "priorityclasses"]
{{- end }}

{{/*
The rules of .rules, each with only its resources in .only (when given) or not in .not,
as YAML; rules left with none are dropped.
*/}}
{{- define "trainyard.rules" -}}
{{- $out := list -}}
{{- range .rules -}}
{{- $keep := list -}}
{{- range .resources -}}
{{- if $.only -}}
{{- if has . $.only }}{{ $keep = append $keep . }}{{ end -}}
{{- else if not (has . $.not) -}}
{{- $keep = append $keep . -}}
{{- end -}}
{{- end -}}
{{- if $keep -}}
{{- $rule := deepCopy . -}}
{{- $_ := set $rule "resources" $keep -}}
{{- $out = append $out $rule -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end }}
