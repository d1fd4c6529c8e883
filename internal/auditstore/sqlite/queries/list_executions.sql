{{/* One page of an organization's (or a project's) tool executions, newest
     first, ties by event_id. Rendered like list_audit.sql: the cursor is a
     row-value range on the index (organization_id[, project_id], started_ms
     DESC, event_id DESC) so that deep pages seek; filters are residual. */ -}}
SELECT organization_id, event_id, execution_id, project_id, user_id,
       principal_id, principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
       started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms, client, salt
FROM tool_executions
WHERE organization_id = :org
{{- if .Project}}
  AND project_id = :project
{{- end}}
{{- if .After}}
  AND (started_ms, event_id) < (:after_ts, :after_id)
{{- end}}
{{- if .Since}}
  AND started_ms >= :since
{{- end}}
{{- if .Until}}
  AND started_ms < :until
{{- end}}
{{- range .Terms}}
  AND {{template "term" .}}
{{- end}}
  AND (:success IS NULL OR success = :success)
  AND (:user IS NULL OR user_id = :user)
ORDER BY started_ms DESC, event_id DESC
LIMIT :limit
