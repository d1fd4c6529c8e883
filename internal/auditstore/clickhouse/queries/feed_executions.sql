{{/* The executions of a chunk of an execution feed, as feed_audit.sql.
     Arguments: org, those of feed_keys.sql, the filters, the arguments of
     the search terms (search.sql). */ -}}
SELECT organization_id, event_id, execution_id, project_id, user_id,
       principal_id, principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
       started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms, client, salt, seq
FROM tool_executions
WHERE organization_id = ?
  AND (started_ms, event_id) IN ({{template "feed_keys" .}})
{{- template "execution_filters" .}}
ORDER BY seq, created_ms, event_id
LIMIT 1 BY event_id
