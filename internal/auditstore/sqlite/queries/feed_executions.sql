{{/* One page of an organization's (or a project's) execution feed, as
     feed_audit.sql. */ -}}
SELECT organization_id, event_id, execution_id, project_id, user_id,
       principal_id, principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
       started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms, client, salt, seq
FROM tool_executions INDEXED BY {{if .Project}}tool_executions_project_feed{{else}}tool_executions_org_feed{{end}}
{{template "feed_where" .}}
  AND (:success IS NULL OR success = :success)
  AND (:user IS NULL OR user_id = :user)
ORDER BY seq, created_ms, event_id
LIMIT :limit
