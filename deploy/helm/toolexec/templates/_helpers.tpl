{{/* The release's name for the chart's objects, at most 63 characters. */}}
{{- define "toolexec.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "toolexec.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "toolexec.labels" -}}
{{ include "toolexec.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Secret holding the NATS URL and credentials. */}}
{{- define "toolexec.natsSecret" -}}
{{- if .Values.nats.existingSecret -}}{{ .Values.nats.existingSecret }}{{- else -}}{{ include "toolexec.fullname" . }}-nats{{- end -}}
{{- end -}}

{{/* The Secret holding the store's URL. */}}
{{- define "toolexec.storeSecret" -}}
{{- if .Values.store.existingSecret -}}{{ .Values.store.existingSecret }}{{- else -}}{{ include "toolexec.fullname" . }}-store{{- end -}}
{{- end -}}

{{/* Whether the credentials file is mounted. */}}
{{- define "toolexec.credsFile" -}}
{{- if or (and .Values.nats.existingSecret .Values.nats.credsFromSecret) (and (not .Values.nats.existingSecret) .Values.nats.creds) -}}true{{- end -}}
{{- end -}}

{{/* Refuse values that cannot work, naming the fix. */}}
{{- define "toolexec.validate" -}}
{{- if not (or .Values.nats.existingSecret .Values.nats.url) -}}
{{- fail "nats: set nats.url (the chart creates a Secret) or nats.existingSecret (a Secret with the key \"url\")" -}}
{{- end -}}
{{- if not (has .Values.store.kind (list "jetstream" "postgres" "redis")) -}}
{{- fail (printf "store.kind %q: want jetstream, postgres or redis (the memory store is not shared between executors)" .Values.store.kind) -}}
{{- end -}}
{{- if and (ne .Values.store.kind "jetstream") (not (or .Values.store.existingSecret .Values.store.url)) -}}
{{- fail (printf "store.kind %s needs store.url (the chart creates a Secret) or store.existingSecret (a Secret with the key \"url\")" .Values.store.kind) -}}
{{- end -}}
{{- if not (or .Values.tools.demo .Values.tools.file .Values.tools.existingConfigMap) -}}
{{- fail "no tools: set tools.file, tools.existingConfigMap or tools.demo" -}}
{{- end -}}
{{- if and .Values.console.enabled (not .Values.console.operatorsSecret) (not .Values.console.existingSecret) -}}
{{- fail "console.enabled needs console.operatorsSecret (a Secret with the key \"operators\": the operators file) or console.existingSecret (a Secret with the key \"token\")" -}}
{{- end -}}
{{- if and .Values.mcp.enabled (not .Values.mcp.tokensSecret) -}}
{{- fail "mcp.enabled needs mcp.tokensSecret (a Secret with the key \"tokens\": a tokens file, see emitter mcp-token)" -}}
{{- end -}}
{{- end -}}
