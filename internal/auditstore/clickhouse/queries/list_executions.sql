{{/* One page of an organization's tool executions in [lo, hi), newest
     first, ties by event_id; only the predicates in use are rendered.
     Two phases: the inner query orders just the key columns of the window
     and keeps the page's (started_ms, event_id); the outer one reads the
     wide columns (hooks, errors) of those rows only — half the time of
     sorting whole rows. LIMIT 1 BY event_id hides redelivered copies that
     no merge has folded yet; the outer one keeps the first write.
     Arguments: org, lo, hi, org, lo, hi, the filters, the arguments of the search
     terms (search.sql), the cursor, limit, limit. */ -}}
SELECT organization_id, event_id, execution_id, project_id, user_id,
       principal_id, principal_type, display_name, client_ip, toolkit, tool_name, tool_version,
       started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms, client, salt
FROM tool_executions
WHERE organization_id = ?
  AND started_ms >= ? AND started_ms < ?
  AND (started_ms, event_id) IN (
    SELECT started_ms, event_id
    FROM tool_executions
    WHERE organization_id = ?
      AND started_ms >= ? AND started_ms < ?
{{- if .Project}}
      AND project_id = ?
{{- end}}
{{- template "execution_filters" .}}
{{- if .After}}
      AND (started_ms < ? OR (started_ms = ? AND event_id < ?))
{{- end}}
    ORDER BY started_ms DESC, event_id DESC
    LIMIT 1 BY event_id
    LIMIT ?)
ORDER BY started_ms DESC, event_id DESC, created_ms ASC
LIMIT 1 BY event_id
LIMIT ?
