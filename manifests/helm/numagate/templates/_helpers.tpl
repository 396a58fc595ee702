{{/* Name of every object: the release name, or <release>-numagate when it lacks "numagate". */}}
{{- define "numagate.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "numagate.labels" -}}
app.kubernetes.io/name: numagate
app.kubernetes.io/part-of: numagate
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The webhook pods; the same selector as manifests/base (one install per cluster). */}}
{{- define "numagate.selectorLabels" -}}
app.kubernetes.io/name: numagate
app.kubernetes.io/component: webhook
{{- end -}}

{{- define "numagate.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}

{{/* Service DNS name the apiserver dials and the serving certificate names. */}}
{{- define "numagate.serviceHost" -}}
{{- printf "%s.%s.svc" (include "numagate.fullname" .) .Release.Namespace -}}
{{- end -}}

{{/* Scope shared by every webhook: never the excluded namespaces nor our own, and the
     ignore label on a namespace or an object opts it out. */}}
{{- define "numagate.webhookScope" -}}
namespaceSelector:
  matchExpressions:
    - key: kubernetes.io/metadata.name
      operator: NotIn
      values: {{ concat .Values.namespaces.excluded (list .Release.Namespace) | uniq | toJson }}
    - key: {{ .Values.namespaces.ignoreLabel }}
      operator: NotIn
      values: ["true"]
objectSelector:
  matchExpressions:
    - key: {{ .Values.namespaces.ignoreLabel }}
      operator: NotIn
      values: ["true"]
{{- end -}}

{{- define "numagate.clientConfig" -}}
clientConfig:
  service:
    name: {{ include "numagate.fullname" .root }}
    namespace: {{ .root.Release.Namespace }}
    path: {{ .path }}
    port: 443
  {{- if and (eq .root.Values.certificates.mode "external") .root.Values.certificates.external.caBundle }}
  caBundle: {{ .root.Values.certificates.external.caBundle }}
  {{- end }}
{{- end -}}

{{- define "numagate.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ printf "%s/%s-serving" .Release.Namespace (include "numagate.fullname" .) }}
{{- end }}
{{- end -}}

{{/* Fail the render on settings that cannot work together. */}}
{{- define "numagate.checks" -}}
{{- $used := addf .Values.preStopSleepSeconds .Values.shutdown.delaySeconds .Values.shutdown.gracePeriodSeconds 5 -}}
{{- if gt (float64 $used) (float64 .Values.terminationGracePeriodSeconds) -}}
{{- fail (printf "terminationGracePeriodSeconds (%v) must be at least preStopSleepSeconds + shutdown.delaySeconds + shutdown.gracePeriodSeconds + 5 = %v (docs/deploy.md, Shutdown timing)" .Values.terminationGracePeriodSeconds $used) -}}
{{- end -}}
{{- $timeout := maxf .Values.webhooks.mutate.timeoutSeconds .Values.webhooks.validate.timeoutSeconds -}}
{{- if lt (float64 .Values.shutdown.gracePeriodSeconds) (float64 $timeout) -}}
{{- fail (printf "shutdown.gracePeriodSeconds (%v) must be at least the longest webhook timeoutSeconds (%v): a review in flight may run that long" .Values.shutdown.gracePeriodSeconds $timeout) -}}
{{- end -}}
{{- if and .Values.serviceMonitor.enabled .Values.podMonitor.enabled -}}
{{- fail "serviceMonitor.enabled and podMonitor.enabled: choose one, or every sample is scraped twice" -}}
{{- end -}}
{{- end -}}

{{/* Security context, resources and mount shared by the certgen Job's two containers. */}}
{{- define "numagate.certgenContainer" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop: [ALL]
  seccompProfile:
    type: RuntimeDefault
resources:
  requests:
    cpu: 10m
    memory: 64Mi
  limits:
    memory: 128Mi
volumeMounts:
  - name: work
    mountPath: /work
{{- end -}}
