{{/* The stats of an organization's entries in [since, until): counts per
     bucket and key ("buckets"), top actors ("actors"), top resources
     ("resources"). Each query adds two parts: its kind of audit_stats
     (0007; .Agg; scope '' for the organization, else the project) for
     whole hours (days, for the tops), [agg_lo, agg_hi), and the raw rows of
     two ranges of audit_logs, left and right, that correct it at the
     ragged ends: added (the part of a step inside the window) or, when
     .Signed, possibly subtracted (the part of a whole step of the aggregate
     that lies outside the window; see aggSpan in stats.go). Without an
     aggregate part the left range is the whole window (a search, a minute
     bucket, a filter the aggregate does not keep). Both parts count rows
     (see 0007 on duplicates), so the two paths answer the same; a key
     whose count comes to 0 is left out, as the raw path never sees it.
     Every value is a ? argument; .Bucket, .Split, .Left and .Right are
     numbers from Go, the keys are column names from Go. Casts keep both
     sides of UNION ALL of one type, which 18.16 requires. Without .Raw
     (an aggregate of whole steps and no ragged end) audit_logs is not read
     at all: an empty range still reads the granule around it.
     Arguments: [org, scope, agg_lo, agg_hi, the aggregate's filters], org,
     left_lo, left_hi, right_lo, right_hi, the filters, the search terms
     (search.sql), [top]. */ -}}
{{define "raw_count"}}toInt64({{if .Signed}}sum(if(ts_ms < {{.Split}}, {{.Left}}, {{.Right}})){{else}}count(){{end}}){{end}}

{{define "raw_where" -}}
WHERE organization_id = ?
    AND ((ts_ms >= ? AND ts_ms < ?) OR (ts_ms >= ? AND ts_ms < ?))
{{- if .Project}}
    AND project_id = ?
{{- end}}
{{- template "audit_filters" .}}
{{- end}}

{{define "buckets" -}}
SELECT toInt64(intDiv(t, {{.Bucket}}) * {{.Bucket}}) AS start, k, toUInt64(sum(c)) AS n
FROM (
{{- if .Agg}}
  SELECT t, toUInt8({{.AggKey}}) AS k, toInt64(sum(n)) AS c
  FROM audit_stats
  WHERE organization_id = ? AND kind = 0 AND scope = ? AND t >= ? AND t < ?
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
{{- if .Raw}}
  UNION ALL
{{- end}}
{{- end}}
{{- if .Raw}}
  SELECT toInt64(intDiv(ts_ms, {{.Bucket}}) * {{.Bucket}}) AS t, toUInt8({{.Key}}) AS k, {{template "raw_count" .}} AS c
  FROM audit_logs
  {{template "raw_where" .}}
  GROUP BY t, k
{{- end}}
)
GROUP BY start, k
HAVING sum(c) > 0
ORDER BY start, k
{{- end}}

{{define "actors" -}}
SELECT principal_id, toUInt64(sum(c)) AS n
FROM (
{{- if .Agg}}
  SELECT value AS principal_id, toInt64(sum(n)) AS c
  FROM audit_stats
  WHERE organization_id = ? AND kind = 1 AND scope = ? AND t >= ? AND t < ?
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
{{- if .Raw}}
  UNION ALL
{{- end}}
{{- end}}
{{- if .Raw}}
  SELECT principal_id, {{template "raw_count" .}} AS c
  FROM audit_logs
  {{template "raw_where" .}}
  GROUP BY principal_id
{{- end}}
)
GROUP BY principal_id
HAVING sum(c) > 0
ORDER BY n DESC, principal_id
LIMIT ?
{{- end}}

{{define "resources" -}}
SELECT rt, rid, toUInt64(sum(c)) AS n
FROM (
{{- if .Agg}}
  SELECT toUInt8(resource_type) AS rt, value AS rid, toInt64(sum(n)) AS c
  FROM audit_stats
  WHERE organization_id = ? AND kind = 2 AND scope = ? AND t >= ? AND t < ?
{{- if .ResourceType}}
    AND resource_type = ?
{{- end}}
    AND value != ''
  GROUP BY rt, rid
{{- if .Raw}}
  UNION ALL
{{- end}}
{{- end}}
{{- if .Raw}}
  SELECT toUInt8(ifNull(resource_type, 0)) AS rt, toString(ifNull(resource_id, '')) AS rid, {{template "raw_count" .}} AS c
  FROM audit_logs
  {{template "raw_where" .}}
    AND ifNull(resource_id, '') != ''
  GROUP BY rt, rid
{{- end}}
)
GROUP BY rt, rid
HAVING sum(c) > 0
ORDER BY n DESC, rid, rt
LIMIT ?
{{- end}}
