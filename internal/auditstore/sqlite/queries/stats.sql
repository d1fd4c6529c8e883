{{/* The stats of an organization's (or a project's) entries in
     [:since, :until): counts per bucket and key, the top actors, the top
     resources. SQLite counts raw rows: the range is a seek on the index
     (organization_id[, project_id], ts_ms), the filters and the terms of a
     search (search.sql) are residual, as in list_audit.sql. Buckets are
     aligned on the epoch (ts_ms is positive: integer division floors).
     Ties of the tops sort by value, bytewise, as ClickHouse does. */ -}}
{{define "where" -}}
WHERE organization_id = :org
{{- if .Project}}
  AND project_id = :project
{{- end}}
  AND ts_ms >= :since AND ts_ms < :until
{{- range .Terms}}
  AND {{template "term" .}}
{{- end}}
  AND (:action IS NULL OR action = :action)
  AND (:source IS NULL OR source = :source)
  AND (:resource_type IS NULL OR resource_type = :resource_type)
{{- end}}

{{define "buckets" -}}
SELECT (ts_ms / :bucket) * :bucket AS start, {{template "key"}} AS k, count(*) AS n
FROM audit_logs
{{template "where" .}}
GROUP BY start, k
ORDER BY start, k
{{- end}}

{{define "actors" -}}
SELECT principal_id, count(*) AS n
FROM audit_logs
{{template "where" .}}
GROUP BY principal_id
ORDER BY n DESC, principal_id
LIMIT :top
{{- end}}

{{define "resources" -}}
SELECT coalesce(resource_type, 0) AS rt, resource_id, count(*) AS n
FROM audit_logs
{{template "where" .}}
  AND coalesce(resource_id, '') != ''
GROUP BY rt, resource_id
ORDER BY n DESC, resource_id, rt
LIMIT :top
{{- end}}
