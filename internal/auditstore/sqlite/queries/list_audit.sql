{{/* One page of an organization's (or a project's) entries, newest first,
     ties by event_id. Rendered in four variants at start: with or without
     the project, and the first page or a page after a cursor. The cursor is
     a row-value range on the index (organization_id[, project_id], ts_ms
     DESC, event_id DESC), so SQLite seeks to it: a deep page costs what the
     first one does. (An "(:after_ts IS NULL OR …)" condition would keep the
     planner to the organization_id prefix and make deep pages linear.)
     Filters are residual: they narrow rows read in index order; since and
     until bound the range; the terms of a search are in search.sql. */ -}}
SELECT event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms, salt
FROM audit_logs
WHERE organization_id = :org
{{- if .Project}}
  AND project_id = :project
{{- end}}
{{- if .After}}
  AND (ts_ms, event_id) < (:after_ts, :after_id)
{{- end}}
{{- if .Since}}
  AND ts_ms >= :since
{{- end}}
{{- if .Until}}
  AND ts_ms < :until
{{- end}}
{{- range .Terms}}
  AND {{template "term" .}}
{{- end}}
  AND (:action IS NULL OR action = :action)
  AND (:source IS NULL OR source = :source)
  AND (:resource_type IS NULL OR resource_type = :resource_type)
ORDER BY ts_ms DESC, event_id DESC
LIMIT :limit
