{{/* The release's object name: the release name, suffixed with the chart name unless it holds it. */}}
{{- define "pgoutbox-relay.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels selecting this release's pods. app.kubernetes.io/name is also the Prometheus job (alerts.yml: job="pgoutbox-relay"). */}}
{{- define "pgoutbox-relay.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pgoutbox-relay.labels" -}}
{{ include "pgoutbox-relay.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "pgoutbox-relay.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- .Values.serviceAccount.name | default (include "pgoutbox-relay.fullname" .) -}}
{{- else -}}
{{- .Values.serviceAccount.name | default "default" -}}
{{- end -}}
{{- end -}}

{{/* RELAY_* variable of a relay flag: on-gap -> RELAY_ON_GAP. */}}
{{- define "pgoutbox-relay.env" -}}
{{- printf "RELAY_%s" (. | upper | replace "-" "_") -}}
{{- end -}}

{{/* The container image: by digest when image.digest is set, else the tag (default: the chart's appVersion). */}}
{{- define "pgoutbox-relay.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The Kafka ports of the NetworkPolicy: networkPolicy.kafka.ports, else the ports of the brokers value. */}}
{{- define "pgoutbox-relay.kafkaPorts" -}}
{{- $ports := list -}}
{{- if .Values.networkPolicy.kafka.ports -}}
{{- $ports = .Values.networkPolicy.kafka.ports -}}
{{- else -}}
{{- range .Values.brokers -}}
{{- $ports = append $ports (splitList ":" . | last | int) -}}
{{- end -}}
{{- end -}}
{{- toJson ($ports | uniq) -}}
{{- end -}}
