{{/* One page of an organization's entries in [lo, hi), newest first, ties by
     event_id. Only the predicates a listing uses are rendered (every variant
     is prepared at start), so ClickHouse reads no column it does not filter on.
     LIMIT 1 BY event_id hides redelivered copies that no merge has folded yet,
     keeping the first write (smallest created_ms). */ -}}
SELECT event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms
FROM audit_logs
WHERE organization_id = ?
  AND ts_ms >= ? AND ts_ms < ?
{{- if .Project}}
  AND project_id = ?
{{- end}}
{{- if .Action}}
  AND action = ?
{{- end}}
{{- if .Source}}
  AND source = ?
{{- end}}
{{- if .ResourceType}}
  AND resource_type = ?
{{- end}}
{{- if .After}}
  AND (ts_ms < ? OR (ts_ms = ? AND event_id < ?))
{{- end}}
ORDER BY ts_ms DESC, event_id DESC, created_ms ASC
LIMIT 1 BY event_id
LIMIT ?
