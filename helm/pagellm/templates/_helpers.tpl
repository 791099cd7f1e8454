{{/* Names, labels and the shared pieces of the router and worker pods. */}}

{{- define "pagellm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-pagellm, at most 40 characters so that suffixes ("-worker-headless") fit 63. */}}
{{- define "pagellm.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "pagellm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pagellm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pagellm.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{ include "pagellm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: pagellm
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "router"). */}}
{{- define "pagellm.componentSelectorLabels" -}}
{{ include "pagellm.selectorLabels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{/* Labels of a component's pod template: stable across chart versions (no chart or app
     version), so that upgrading the chart alone replaces no pod. */}}
{{- define "pagellm.podLabels" -}}
{{ include "pagellm.componentSelectorLabels" . }}
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "pagellm.componentLabels" -}}
{{ include "pagellm.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "pagellm.routerName" -}}{{ include "pagellm.fullname" . }}-router{{- end -}}
{{- define "pagellm.workerName" -}}{{ include "pagellm.fullname" . }}-worker{{- end -}}
{{- define "pagellm.workerHeadlessName" -}}{{ include "pagellm.fullname" . }}-worker-headless{{- end -}}

{{/* The workers' headless Service as a DNS name, and the router's --worker-dns. */}}
{{- define "pagellm.workerHost" -}}
{{ include "pagellm.workerHeadlessName" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- end -}}
{{- define "pagellm.routerHost" -}}
{{ include "pagellm.routerName" . }}.{{ .Release.Namespace }}.svc.{{ .Values.clusterDomain }}
{{- end -}}

{{- define "pagellm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "pagellm.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "pagellm.image" -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}
{{- end -}}

{{- define "pagellm.apiKeysSecretName" -}}
{{- default (printf "%s-api-keys" (include "pagellm.fullname" .)) .Values.apiKeys.existingSecret -}}
{{- end -}}
{{- define "pagellm.workerTokenSecretName" -}}
{{- default (printf "%s-worker-token" (include "pagellm.fullname" .)) .Values.workerToken.existingSecret -}}
{{- end -}}

{{/* terminationGracePeriodSeconds of a component: (dict "ctx" $ "c" .Values.router).
     Contract: the pod's grace covers the preStop sleep plus the binary's --shutdown-grace, so a
     draining stream is never cut by SIGKILL before its grace ends. */}}
{{- define "pagellm.terminationGrace" -}}
{{- $need := add .ctx.Values.lifecycle.preStopSleepSeconds .c.shutdownGraceSeconds -}}
{{- if eq (int .c.terminationGracePeriodSeconds) 0 -}}
{{ add $need 15 }}
{{- else if le (int .c.terminationGracePeriodSeconds) (int $need) -}}
{{- fail (printf "terminationGracePeriodSeconds %d must exceed preStopSleepSeconds + shutdownGraceSeconds = %d" (int .c.terminationGracePeriodSeconds) (int $need)) -}}
{{- else -}}
{{ .c.terminationGracePeriodSeconds }}
{{- end -}}
{{- end -}}

{{/* The preStop hook, or nothing. */}}
{{- define "pagellm.lifecycle" -}}
{{- with .Values.lifecycle }}
{{- if gt (int .preStopSleepSeconds) 0 }}
lifecycle:
  preStop:
    {{- if .useSleepAction }}
    sleep:
      seconds: {{ .preStopSleepSeconds }}
    {{- else }}
    exec:
      command: ["/bin/sleep", "{{ .preStopSleepSeconds }}"]
    {{- end }}
{{- end }}
{{- end }}
{{- end -}}

{{/* Pod-level fields shared by every pod: (dict "ctx" $ "c" .Values.router). */}}
{{- define "pagellm.podCommon" -}}
serviceAccountName: {{ include "pagellm.serviceAccountName" .ctx }}
automountServiceAccountToken: {{ .ctx.Values.serviceAccount.automountToken }}
securityContext:
  {{- toYaml .ctx.Values.podSecurityContext | nindent 2 }}
{{- with .ctx.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with .c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}
