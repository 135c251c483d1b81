{{/* Names, labels and the shared pieces of every pod of the chart. */}}

{{- define "reverser.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "reverser.fullname" -}}
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

{{/* "<fullname>-<component>", kept within the 63-character name limit. */}}
{{- define "reverser.componentName" -}}
{{- printf "%s-%s" (include "reverser.fullname" .root | trunc (int (sub 62 (len .component))) | trimSuffix "-") .component }}
{{- end }}

{{- define "reverser.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "reverser.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "reverser.selectorLabels" -}}
app.kubernetes.io/name: {{ include "reverser.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "reverser.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The restricted Pod Security Standard: non-root, no privilege escalation, no
capabilities, RuntimeDefault seccomp, read-only root filesystem.
*/}}
{{- define "reverser.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "reverser.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/* Attribution flags shared by the receiver and every injected sidecar. */}}
{{- define "reverser.attributionArgs" -}}
{{- if not .Values.attribution.enabled }}
- --author-attribution=false
{{- else }}
- --author-attribution-transport={{ .Values.attribution.transport }}
- --author-attribution-grace={{ .Values.attribution.grace }}
- --author-attribution-ttl={{ .Values.attribution.ttl }}
- --author-attribution-collection-window={{ .Values.attribution.collectionWindow }}
{{- if not (kindIs "invalid" .Values.attribution.adaptiveGraceMisses) }}
- --author-attribution-adaptive-grace
- --author-attribution-adaptive-grace-misses={{ int64 .Values.attribution.adaptiveGraceMisses }}
{{- end }}
{{- if not (kindIs "invalid" .Values.attribution.maxFacts) }}
- --author-attribution-max-facts={{ int64 .Values.attribution.maxFacts }}
{{- end }}
{{- if not (kindIs "invalid" .Values.attribution.maxFactsPerType) }}
- --author-attribution-max-facts-per-type={{ int64 .Values.attribution.maxFactsPerType }}
{{- end }}
{{- with .Values.attribution.auditRouteAnnotationKey }}
- --author-attribution-audit-route-annotation-key={{ . }}
{{- end }}
{{- end }}
{{- end }}

{{/* Redis is read only when attribution is on and travels through it. */}}
{{- define "reverser.usesRedis" -}}
{{- if and .Values.attribution.enabled (eq .Values.attribution.transport "redis") }}true{{ end }}
{{- end }}

{{/* The receiver exists only to take audit events for attribution. */}}
{{- define "reverser.receiverOn" -}}
{{- if and .Values.receiver.enabled .Values.attribution.enabled }}true{{ end }}
{{- end }}

{{/*
The chart's own guard (spec, "The transports"): memory "is refused with more
than one replica ... the chart's own guard fails a multi-replica install with
the in-memory transport outright".
*/}}
{{- define "reverser.guards" -}}
{{- if and (include "reverser.receiverOn" .) (eq .Values.attribution.transport "memory") (gt (int .Values.receiver.replicaCount) 1) }}
{{- fail (printf "attribution.transport=memory keeps facts inside one process, so it is refused with receiver.replicaCount=%d: set receiver.replicaCount=1, or use attribution.transport=redis with redis.existingSecret naming a Secret that holds the Redis URL" (int .Values.receiver.replicaCount)) }}
{{- end }}
{{- if and (include "reverser.usesRedis" .) (not .Values.redis.existingSecret) }}
{{- fail "attribution.transport=redis needs redis.existingSecret: create a Secret holding the Redis URL (kubectl create secret generic reverser-redis --from-literal=url=redis://...) and name it in redis.existingSecret" }}
{{- end }}
{{- if and .Values.injector.enabled (not .Values.certManager.enabled) .Values.injector.tls.existingSecret (not .Values.injector.tls.caBundle) }}
{{- fail "injector.tls.existingSecret is set but injector.tls.caBundle is empty: the API server must trust the webhook's certificate, so set injector.tls.caBundle to the base64 PEM of the CA that signed it (or enable certManager)" }}
{{- end }}
{{- if and .Values.injector.enabled (not .Values.injector.podSelectorEnabled) (not .Values.injector.namespaceSelectorEnabled) }}
{{- fail "injector.podSelectorEnabled and injector.namespaceSelectorEnabled are both false, so the webhook would select no pod: enable one, or set injector.enabled=false" }}
{{- end }}
{{- /* One writer per branch (spec, mirror.md): two mirrors of one GitTarget would race. */}}
{{- $targets := list }}
{{- range $i, $m := .Values.mirrors }}
{{- $t := printf "%s/%s" $m.gitTarget.namespace $m.gitTarget.name }}
{{- if has $t $targets }}
{{- fail (printf "mirrors[%d] mirrors GitTarget %s again: one mirror per GitTarget (two writers of one branch would race); merge the two entries" $i $t) }}
{{- end }}
{{- $targets = append $targets $t }}
{{- end }}
{{- end }}

{{/* Namespaces no webhook of this chart ever touches. */}}
{{- define "reverser.excludedNamespaces" -}}
{{- $ns := list "kube-system" .Release.Namespace }}
{{- range .Values.injector.excludedNamespaces }}{{ $ns = append $ns . }}{{ end }}
{{- toJson (uniq $ns) }}
{{- end }}

{{/*
A CA and serving certificate generated at install time, reused from the
existing Secret on upgrade so the caBundle does not churn. Returns JSON with
ca, cert, key (PEM).
*/}}
{{- define "reverser.generatedTLS" -}}
{{- $secretName := .secretName }}
{{- $existing := lookup "v1" "Secret" .root.Release.Namespace $secretName }}
{{- if and $existing $existing.data (index $existing.data "ca.crt") }}
{{- dict "ca" (index $existing.data "ca.crt" | b64dec) "cert" (index $existing.data "tls.crt" | b64dec) "key" (index $existing.data "tls.key" | b64dec) | toJson }}
{{- else }}
{{- $ca := genCA (printf "%s-ca" .service) 3650 }}
{{- $ns := .root.Release.Namespace }}
{{- $dns := list .service (printf "%s.%s" .service $ns) (printf "%s.%s.svc" .service $ns) (printf "%s.%s.svc.cluster.local" .service $ns) }}
{{- $cert := genSignedCert (printf "%s.%s.svc" .service $ns) .ips $dns 3650 $ca }}
{{- dict "ca" $ca.Cert "cert" $cert.Cert "key" $cert.Key | toJson }}
{{- end }}
{{- end }}

{{/*
A mirror's object name: "<fullname>-mirror-<namespace>-<name>", cut to 48
characters, then a hash of "namespace/name". The hash keeps names unique
however they are cut (and "a-b/c" apart from "a/b-c"); 48 + 9 leaves room
for the "-watch" suffix within 63.
*/}}
{{- define "reverser.mirrorName" -}}
{{- $t := .mirror.gitTarget }}
{{- $readable := printf "%s-mirror-%s-%s" (include "reverser.fullname" .root) $t.namespace $t.name | replace "." "-" | trunc 48 }}
{{- $readable = regexReplaceAll "-+$" $readable "" }}
{{- printf "%s-%s" $readable (printf "%s/%s" $t.namespace $t.name | sha256sum | trunc 8) }}
{{- end }}
