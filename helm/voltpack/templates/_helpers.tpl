{{/* Names, labels and the security settings every voltpack container shares. */}}

{{- define "voltpack.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "voltpack.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains (include "voltpack.name" .) .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name (include "voltpack.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "voltpack.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "voltpack.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: voltpack
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: (dict "ctx" $ "component" "operator") */}}
{{- define "voltpack.selectorLabels" -}}
app.kubernetes.io/name: {{ include "voltpack.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "voltpack.componentLabels" -}}
{{ include "voltpack.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "voltpack.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "voltpack.operatorServiceAccount" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (printf "%s-operator" (include "voltpack.fullname" .)) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- required "operator.serviceAccount.name is required when operator.serviceAccount.create is false" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "voltpack.agentServiceAccount" -}}
{{- if .Values.agent.serviceAccount.create -}}
{{- default (printf "%s-agent" (include "voltpack.fullname" .)) .Values.agent.serviceAccount.name -}}
{{- else -}}
{{- required "agent.serviceAccount.name is required when agent.serviceAccount.create is false" .Values.agent.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "voltpack.apiServiceAccount" -}}
{{- if .Values.api.serviceAccount.create -}}
{{- default (printf "%s-api" (include "voltpack.fullname" .)) .Values.api.serviceAccount.name -}}
{{- else -}}
{{- required "api.serviceAccount.name is required when api.serviceAccount.create is false" .Values.api.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "voltpack.policyConfigMap" -}}
{{- default (printf "%s-policy" (include "voltpack.fullname" .)) .Values.policy.existingConfigMap -}}
{{- end -}}

{{- define "voltpack.apiTokenSecret" -}}
{{- default (printf "%s-api-token" (include "voltpack.fullname" .)) .Values.api.auth.existingSecret -}}
{{- end -}}

{{/* "true" when a monitoring object is on: a bool, or "auto" and the cluster serves the API. */}}
{{- define "voltpack.monitoringOn" -}}
{{- $want := .want -}}
{{- if eq (toString $want) "auto" -}}
{{- if .ctx.Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- else if $want -}}true{{- end -}}
{{- end -}}

{{/* Pod-level security: non-root, RuntimeDefault seccomp. */}}
{{- define "voltpack.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Container-level security: nothing writable but the mounted volumes, no capabilities. */}}
{{- define "voltpack.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
privileged: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Environment every voltpack process needs with a read-only root file system. */}}
{{- define "voltpack.commonEnv" -}}
- name: HOME
  value: /tmp
- name: MPLCONFIGDIR
  value: /tmp/matplotlib
- name: PYTHONUNBUFFERED
  value: "1"
{{- end -}}

{{/* One --scheduler-name per served name (schedulerNames), for the operator and the API. */}}
{{- define "voltpack.schedulerNameArgs" -}}
{{- range .Values.schedulerNames }}
- {{ printf "--scheduler-name=%s" . | quote }}
{{- end }}
{{- end -}}

{{/* The API container (sidecar or its own Deployment). */}}
{{- define "voltpack.apiContainer" -}}
- name: api
  image: {{ include "voltpack.image" . }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  args:
    - api
    - --host=0.0.0.0
    - --port={{ .Values.api.port }}
    - --namespace=$(POD_NAMESPACE)
    - --policy-configmap={{ include "voltpack.policyConfigMap" . }}
    {{- if eq .Values.api.auth.mode "token-file" }}
    - --token-file=/var/run/voltpack/api/tokens.csv
    {{- end }}
    - --database-url=$(VOLTPACK_DATABASE_URL)
    {{- include "voltpack.schedulerNameArgs" . | nindent 4 }}
    {{- range .Values.api.extraArgs }}
    - {{ . | quote }}
    {{- end }}
  env:
    {{- include "voltpack.commonEnv" . | nindent 4 }}
    - name: POD_NAMESPACE
      valueFrom:
        fieldRef:
          fieldPath: metadata.namespace
    {{- include "voltpack.databaseEnv" . | nindent 4 }}
    {{- with .Values.api.extraEnv }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  ports:
    - name: http-api
      containerPort: {{ .Values.api.port }}
      protocol: TCP
  readinessProbe:
    tcpSocket:
      port: http-api
    periodSeconds: 10
  livenessProbe:
    tcpSocket:
      port: http-api
    initialDelaySeconds: 30
    periodSeconds: 20
  resources:
    {{- toYaml .Values.api.resources | nindent 4 }}
  securityContext:
    {{- include "voltpack.containerSecurityContext" . | nindent 4 }}
  volumeMounts:
    - name: tmp
      mountPath: /tmp
    - name: api-data
      mountPath: /var/lib/voltpack
    {{- if eq .Values.api.auth.mode "token-file" }}
    - name: api-token
      mountPath: /var/run/voltpack/api
      readOnly: true
    {{- end }}
{{- end -}}

{{/* The history database URL, from the values or a Secret (API and operator share it). */}}
{{- define "voltpack.databaseEnv" -}}
- name: VOLTPACK_DATABASE_URL
  {{- if .Values.api.database.existingSecret }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.api.database.existingSecret }}
      key: url
  {{- else }}
  value: {{ .Values.api.database.url | quote }}
  {{- end }}
{{- end -}}

{{- define "voltpack.apiVolumes" -}}
- name: api-data
  emptyDir:
    sizeLimit: 1Gi
{{- if eq .Values.api.auth.mode "token-file" }}
- name: api-token
  secret:
    secretName: {{ include "voltpack.apiTokenSecret" . }}
    defaultMode: 0440
    items:
      - key: tokens.csv
        path: tokens.csv
{{- end }}
{{- end -}}
