{{/* ---------------------------------------------------------------- names */}}

{{- define "berth.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-<chart>, or <release> alone when it already contains the chart name. Kept to 40
characters so that "<fullname>-scheduler-client-tls" and the like stay within 63. */}}
{{- define "berth.fullname" -}}
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

{{- define "berth.extender.fullname" -}}{{ include "berth.fullname" . }}-extender{{- end -}}
{{- define "berth.operator.fullname" -}}{{ include "berth.fullname" . }}-operator{{- end -}}
{{- define "berth.scheduler.fullname" -}}{{ include "berth.fullname" . }}-scheduler{{- end -}}
{{- define "berth.webhook.fullname" -}}{{ include "berth.fullname" . }}-webhook{{- end -}}
{{- /* The Lease that elects the extender replica that nominates (scheduler.profile nominate) */ -}}
{{- define "berth.extender.nominatorLease" -}}{{ include "berth.extender.fullname" . }}-nominator{{- end -}}

{{/* The Secrets holding the TLS material: the same layout (tls.crt, tls.key, ca.crt) whether
the chart or cert-manager makes them. */}}
{{- define "berth.tls.caSecret" -}}{{ include "berth.fullname" . }}-ca{{- end -}}
{{- define "berth.tls.extenderSecret" -}}{{ include "berth.fullname" . }}-extender-tls{{- end -}}
{{- define "berth.tls.schedulerClientSecret" -}}{{ include "berth.fullname" . }}-scheduler-client-tls{{- end -}}
{{- define "berth.tls.webhookSecret" -}}{{ include "berth.fullname" . }}-webhook-tls{{- end -}}

{{/* The DNS names of the extender's Service, the first one being what kube-scheduler dials. */}}
{{- define "berth.extender.dnsNames" -}}
{{- $svc := include "berth.extender.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list (printf "%s.%s.svc" $svc $ns) $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{- define "berth.webhook.dnsNames" -}}
{{- $svc := include "berth.webhook.fullname" . -}}
{{- $ns := .Release.Namespace -}}
{{- list (printf "%s.%s.svc" $svc $ns) $svc (printf "%s.%s" $svc $ns) (printf "%s.%s.svc.cluster.local" $svc $ns) | toJson -}}
{{- end -}}

{{/* The URL kube-scheduler calls: https://<service>.<namespace>.svc:<port> */}}
{{- define "berth.extender.url" -}}
https://{{ include "berth.extender.fullname" . }}.{{ .Release.Namespace }}.svc:{{ .Values.extender.port }}
{{- end -}}

{{/* The CommonName of the client certificate kube-scheduler presents. */}}
{{- define "berth.tls.schedulerClientCN" -}}berth-scheduler-client{{- end -}}

{{/* Chart-generated TLS: the leaf a release keeps, or "" when it must be issued anew. A leaf is kept
when its Secret exists with its key, was signed by the CA in force, names the same names (the
berth.dev/tls-names annotation, a hash of CN and DNS names) and stays valid for more than
tls.renewBeforeDays (the berth.dev/tls-expires annotation, Unix seconds). Deterministic within one
render (lookups only), so a Deployment can roll exactly when its leaf is renewed.
Arguments: (list ctx secretName namesHash). */}}
{{- define "berth.tls.keptLeaf" -}}
{{- $ctx := index . 0 }}
{{- $prev := lookup "v1" "Secret" $ctx.Release.Namespace (index . 1) }}
{{- $caSecret := $ctx.Values.tls.existingCASecret | default (include "berth.tls.caSecret" $ctx) }}
{{- $caCrt := dig "data" "tls.crt" "" (lookup "v1" "Secret" $ctx.Release.Namespace $caSecret) }}
{{- $expires := dig "metadata" "annotations" "berth.dev/tls-expires" "0" $prev | atoi }}
{{- $renewFrom := add (now | unixEpoch | atoi) (mul (int $ctx.Values.tls.renewBeforeDays) 86400) }}
{{- if and $caCrt (eq (dig "data" "ca.crt" "" $prev) $caCrt) (eq (dig "metadata" "annotations" "berth.dev/tls-names" "" $prev) (index . 2)) (dig "data" "tls.key" "" $prev) (gt $expires $renewFrom) }}
{{- dig "data" "tls.crt" "" $prev }}
{{- end }}
{{- end -}}

{{/* A pod annotation that changes when the chart renews a leaf the pod presents but cannot reload
(kube-scheduler's client certificate): the kept leaf's hash, or the revision that renewed it. */}}
{{- define "berth.tls.leafStamp" -}}
{{- $kept := include "berth.tls.keptLeaf" . }}
{{- if $kept }}{{ $kept | sha256sum | trunc 16 }}{{ else }}renewed-in-revision-{{ (index . 0).Release.Revision }}{{ end }}
{{- end -}}

{{- define "berth.tls.namesHash" -}}{{ printf "%s|%s" (index . 0) (join "," (index . 1)) | sha256sum | trunc 16 }}{{- end -}}

{{/* ---------------------------------------------------------------- labels */}}

{{- define "berth.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "berth.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: berth
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: include "berth.selectorLabels" (list . "extender") */}}
{{- define "berth.selectorLabels" -}}
{{- $ctx := index . 0 -}}
app.kubernetes.io/name: {{ include "berth.name" $ctx }}
app.kubernetes.io/instance: {{ $ctx.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* All labels of one component's objects. */}}
{{- define "berth.componentLabels" -}}
{{ include "berth.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{/* ---------------------------------------------------------------- images */}}

{{- define "berth.image" -}}
{{- $tag := default .Chart.AppVersion .Values.image.tag -}}
{{- if .Values.image.digest -}}
{{ .Values.image.repository }}@{{ .Values.image.digest }}
{{- else -}}
{{ .Values.image.repository }}:{{ $tag }}
{{- end -}}
{{- end -}}

{{/* kube-scheduler's image: the tag given, or the API server's vMAJOR.MINOR.PATCH (without a
vendor suffix such as -gke.100 or +k3s1, which registry.k8s.io does not publish). */}}
{{- define "berth.scheduler.image" -}}
{{- $tag := .Values.scheduler.image.tag -}}
{{- if not $tag -}}
{{- $v := semver .Capabilities.KubeVersion.Version -}}
{{- $tag = printf "v%d.%d.%d" $v.Major $v.Minor $v.Patch -}}
{{- end -}}
{{ .Values.scheduler.image.repository }}:{{ $tag }}
{{- end -}}

{{/* ---------------------------------------------------------------- pods */}}

{{/* BERTH_* settings, shared by the extender and the operator. */}}
{{- define "berth.settingsEnv" -}}
{{- $s := .Values.settings -}}
- name: BERTH_CPU_OVERCOMMIT_PERCENT
  value: {{ $s.cpuOvercommitPercent | quote }}
- name: BERTH_MEMORY_OVERCOMMIT_PERCENT
  value: {{ $s.memoryOvercommitPercent | quote }}
- name: BERTH_MIN_FREE_DISK_PERCENT
  value: {{ $s.minFreeDiskPercent | quote }}
- name: BERTH_REJECT_UNKNOWN_CAPACITY
  value: {{ $s.rejectUnknownCapacity | quote }}
- name: BERTH_LIVENESS_THRESHOLD_SECONDS
  value: {{ $s.livenessThresholdSeconds | quote }}
- name: BERTH_SLEEPY_MEMORY_FACTOR
  value: {{ $s.sleepyMemoryFactor | quote }}
- name: BERTH_ROUND_TIMEOUT_SECONDS
  value: {{ $s.roundTimeoutSeconds | quote }}
- name: BERTH_DEFAULT_STRATEGY
  value: {{ $s.defaultStrategy | quote }}
- name: BERTH_LOG_LEVEL
  value: {{ $s.logLevel | quote }}
- name: POD_NAME
  valueFrom: {fieldRef: {fieldPath: metadata.name}}
- name: POD_NAMESPACE
  valueFrom: {fieldRef: {fieldPath: metadata.namespace}}
{{- end -}}

{{- define "berth.podSecurityContext" -}}
{{ toYaml .Values.podSecurityContext }}
{{- end -}}

{{- define "berth.containerSecurityContext" -}}
{{ toYaml .Values.containerSecurityContext }}
{{- end -}}

{{- define "berth.imagePullSecrets" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* The ValidatingWebhookConfiguration for PlacementPolicy and NodeDrain:
include "berth.webhookConfiguration" (dict "ctx" . "caBundle" "..." "annotations" (dict)) */}}
{{- define "berth.webhookConfiguration" -}}
{{- $ctx := .ctx -}}
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{ include "berth.webhook.fullname" $ctx }}
  labels:
    {{- include "berth.componentLabels" (list $ctx "operator") | nindent 4 }}
  {{- with .annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
webhooks:
  - name: placementpolicies.validate.berth.dev
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: {{ $ctx.Values.operator.webhook.failurePolicy }}
    matchPolicy: Equivalent
    timeoutSeconds: {{ $ctx.Values.operator.webhook.timeoutSeconds }}
    rules:
      - apiGroups: [berth.dev]
        apiVersions: ["*"]
        resources: [placementpolicies]
        operations: [CREATE, UPDATE]
        scope: Namespaced
    clientConfig:
      service:
        name: {{ include "berth.webhook.fullname" $ctx }}
        namespace: {{ $ctx.Release.Namespace }}
        path: {{ include "berth.operator.webhookPath" $ctx }}
        port: 443
      {{- with .caBundle }}
      caBundle: {{ . }}
      {{- end }}
  - name: nodedrains.validate.berth.dev
    admissionReviewVersions: [v1]
    sideEffects: None
    failurePolicy: {{ $ctx.Values.operator.webhook.failurePolicy }}
    matchPolicy: Equivalent
    timeoutSeconds: {{ $ctx.Values.operator.webhook.timeoutSeconds }}
    rules:
      - apiGroups: [berth.dev]
        apiVersions: ["*"]
        resources: [nodedrains]
        operations: [CREATE, UPDATE]
        scope: Cluster
    clientConfig:
      service:
        name: {{ include "berth.webhook.fullname" $ctx }}
        namespace: {{ $ctx.Release.Namespace }}
        path: {{ include "berth.operator.drainWebhookPath" $ctx }}
        port: 443
      {{- with .caBundle }}
      caBundle: {{ . }}
      {{- end }}
{{- end -}}

{{/* The paths Kopf serves the validating handlers on: "/" + the handler's id. */}}
{{- define "berth.operator.webhookPath" -}}/validate-placementpolicy{{- end -}}
{{- define "berth.operator.drainWebhookPath" -}}/validate-nodedrain{{- end -}}
