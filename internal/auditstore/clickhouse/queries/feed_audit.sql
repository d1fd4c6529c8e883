{{/* The entries of a chunk of an audit feed (feed_keys.sql) that the
     filters keep, in feed order. The rows are read by primary key
     ((ts_ms, event_id) IN …); LIMIT 1 BY event_id hides a copy written
     twice. Arguments: org, those of feed_keys.sql, the filters, the
     arguments of the search terms (search.sql). */ -}}
SELECT event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms, salt, seq
FROM audit_logs
WHERE organization_id = ?
  AND (ts_ms, event_id) IN ({{template "feed_keys" .}})
{{- template "audit_filters" .}}
ORDER BY seq, created_ms, event_id
LIMIT 1 BY event_id
