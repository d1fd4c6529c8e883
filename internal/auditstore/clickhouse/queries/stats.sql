{{/* The stats of an organization's entries in [since, until): counts per
     bucket and key ("buckets"), top actors ("actors"), top resources
     ("resources"). Each query adds two parts: an aggregate of 0007
     (.Agg: audit_stats_hours, audit_stats_actors, audit_stats_resources; scope
     '' for the organization, else the project) for the whole hours (days,
     for the tops) of the window, [agg_lo, agg_hi), and the raw rows
     of the ragged ends, [since, agg_lo) and [agg_hi, until) — the whole
     window when there is no aggregate part (a search, a minute bucket, a
     filter the aggregate does not keep, or a window within one hour or day).
     Both parts count rows (see 0007 on duplicates), so the two paths answer
     the same. Every value is a ? argument; .Bucket is a number from Go, the
     keys are column names from Go. Casts keep both sides of UNION ALL of one
     type, which 18.16 requires.
     Arguments: [org, scope, agg_lo, agg_hi, the aggregate's filters], org, since,
     agg_lo, agg_hi, until, the filters, the search terms (search.sql), [top]. */ -}}
{{define "raw_where" -}}
WHERE organization_id = ?
    AND ((ts_ms >= ? AND ts_ms < ?) OR (ts_ms >= ? AND ts_ms < ?))
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
{{- range .Terms}}
    AND {{template "term" .}}
{{- end}}
{{- end}}

{{define "buckets" -}}
SELECT toInt64(intDiv(t, {{.Bucket}}) * {{.Bucket}}) AS start, k, toUInt64(sum(c)) AS n
FROM (
{{- if .Agg}}
  SELECT toInt64(hour) AS t, toUInt8({{.AggKey}}) AS k, toUInt64(sum(n)) AS c
  FROM audit_stats_hours
  WHERE organization_id = ? AND scope = ? AND hour >= ? AND hour < ?
{{- if .Action}}
    AND action = ?
{{- end}}
{{- if .Source}}
    AND source = ?
{{- end}}
{{- if .ResourceType}}
    AND resource_type = ?
{{- end}}
  GROUP BY t, k
  UNION ALL
{{- end}}
  SELECT toInt64(intDiv(ts_ms, {{.Bucket}}) * {{.Bucket}}) AS t, toUInt8({{.Key}}) AS k, toUInt64(count()) AS c
  FROM audit_logs
  {{template "raw_where" .}}
  GROUP BY t, k
)
GROUP BY start, k
ORDER BY start, k
{{- end}}

{{define "actors" -}}
SELECT principal_id, toUInt64(sum(c)) AS n
FROM (
{{- if .Agg}}
  SELECT principal_id, toUInt64(sum(n)) AS c
  FROM audit_stats_actors
  WHERE organization_id = ? AND scope = ? AND day >= ? AND day < ?
{{- if .Action}}
    AND action = ?
{{- end}}
{{- if .Source}}
    AND source = ?
{{- end}}
{{- if .ResourceType}}
    AND resource_type = ?
{{- end}}
  GROUP BY principal_id
  UNION ALL
{{- end}}
  SELECT principal_id, toUInt64(count()) AS c
  FROM audit_logs
  {{template "raw_where" .}}
  GROUP BY principal_id
)
GROUP BY principal_id
ORDER BY n DESC, principal_id
LIMIT ?
{{- end}}

{{define "resources" -}}
SELECT rt, rid, toUInt64(sum(c)) AS n
FROM (
{{- if .Agg}}
  SELECT toUInt8(resource_type) AS rt, toString(resource_id) AS rid, toUInt64(sum(n)) AS c
  FROM audit_stats_resources
  WHERE organization_id = ? AND scope = ? AND day >= ? AND day < ?
{{- if .ResourceType}}
    AND resource_type = ?
{{- end}}
    AND resource_id != ''
  GROUP BY rt, rid
  UNION ALL
{{- end}}
  SELECT toUInt8(ifNull(resource_type, 0)) AS rt, toString(ifNull(resource_id, '')) AS rid, toUInt64(count()) AS c
  FROM audit_logs
  {{template "raw_where" .}}
    AND ifNull(resource_id, '') != ''
  GROUP BY rt, rid
)
GROUP BY rt, rid
ORDER BY n DESC, rid, rt
LIMIT ?
{{- end}}
