{{/* One page of an organization's entries in [lo, hi), newest first, ties by
     event_id. Only the predicates a listing uses are rendered (every variant
     is prepared at start), so ClickHouse reads no column it does not filter on.
     Two phases, as list_executions.sql: the inner query orders only the key
     columns of the window and keeps the page's (ts_ms, event_id); the outer
     one reads the wide columns (data, names) of those rows only.
     LIMIT 1 BY event_id hides redelivered copies that no merge has folded yet;
     the outer one keeps the first write (smallest created_ms).
     Arguments: org, lo, hi, org, lo, hi, the filters, the arguments of the search
     terms (search.sql), the cursor, limit, limit. */ -}}
SELECT event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms, salt
FROM audit_logs
WHERE organization_id = ?
  AND ts_ms >= ? AND ts_ms < ?
  AND (ts_ms, event_id) IN (
    SELECT ts_ms, event_id
    FROM audit_logs
    WHERE organization_id = ?
      AND ts_ms >= ? AND ts_ms < ?
{{- if .Project}}
      AND project_id = ?
{{- end}}
{{- template "audit_filters" .}}
{{- if .After}}
      AND (ts_ms < ? OR (ts_ms = ? AND event_id < ?))
{{- end}}
    ORDER BY ts_ms DESC, event_id DESC
    LIMIT 1 BY event_id
    LIMIT ?)
ORDER BY ts_ms DESC, event_id DESC, created_ms ASC
LIMIT 1 BY event_id
LIMIT ?
