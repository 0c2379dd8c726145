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
