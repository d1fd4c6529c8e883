{{/* The retention's queries (lifecycle.go): an expiry deletes an
     organization's entries of one kind (audit_logs or tool_executions,
     .Table, whose time column is .TS) stored at or before a feed key
     (seq, created_ms, event_id) and persisted before a cutoff, except the
     kept ones, and every row derived from them. "expiring" is that
     predicate without the organization: its arguments are the key's seq
     (twice: seq <= ? lets the primary key of feed_index bound the range,
     which the tuple comparison alone does not on 18.16), created_ms and
     event_id, the cutoff, then those of .Keep (rendered in Go: nothing, a
     list of literals, or a subquery of lifecycle_keep). */ -}}
{{define "expiring" -}}
seq <= ? AND (seq, created_ms, event_id) <= (?, ?, ?) AND created_ms < ?{{.Keep}}
{{- end}}

{{/* CountThrough: the distinct entries through the key, and those among
     them persisted before the cutoff (an entry's first copy). A GROUP BY
     rather than uniqExact: its state may spill to disk
     (max_bytes_before_external_group_by, set by the store), where the
     set of uniqExact holds every id in memory (560 MiB for 3M entries,
     measured here). Arguments: cutoff, org, the key. */ -}}
{{define "count_through" -}}
SELECT count(), countIf(first_ms < ?)
FROM (
    SELECT event_id, min(created_ms) AS first_ms
    FROM {{.Table}}
    WHERE organization_id = ?
      AND seq <= ? AND (seq, created_ms, event_id) <= (?, ?, ?)
    GROUP BY event_id)
{{- end}}

{{/* The kept entries that the expiry would delete otherwise (the ids of
     the caller's keep set travel as external data, lifecycle_keep_ids).
     Arguments: org, those of "expiring" (no .Keep). */ -}}
{{define "kept" -}}
SELECT DISTINCT event_id
FROM {{.Table}}
WHERE organization_id = ?
  AND {{template "expiring" .}}
  AND event_id IN (SELECT event_id FROM lifecycle_keep_ids)
{{- end}}

{{/* What an expiry deletes: the distinct entries and their time range,
     in the entries' table and in feed_index (where rows are left when a
     run stopped between the deletions of the entries and of the index).
     Arguments: org, "expiring"; for the index: org, kind, "expiring". */ -}}
{{define "doomed_entries" -}}
SELECT count(), min(lo), max(hi)
FROM (
    SELECT event_id, min({{.TS}}) AS lo, max({{.TS}}) AS hi
    FROM {{.Table}}
    WHERE organization_id = ?
      AND {{template "expiring" .}}
    GROUP BY event_id)
{{- end}}

{{define "doomed_index" -}}
SELECT count(), min(lo), max(hi)
FROM (
    SELECT event_id, min(ts_ms) AS lo, max(ts_ms) AS hi
    FROM feed_index
    WHERE organization_id = ? AND kind = ? AND scope = ''
      AND {{template "expiring" .}}
    GROUP BY event_id)
{{- end}}

{{/* The deletions (ALTER TABLE … DELETE WHERE, each ending with the tag
     of its run: AND ? != ''). .Entries, .Index, .FeedIndex, .EventIndex,
     .Hours and .Stats are the tables' names, qualified, local ones on a
     cluster. */ -}}
{{define "delete_entries" -}}
ALTER TABLE {{.Entries}} DELETE WHERE organization_id = ? AND {{template "expiring" .}} AND ? != ''
{{- end}}

{{/* feed_index (every scope) or feed_leaves (.Index). Arguments: org,
     kind, "expiring", tag. */ -}}
{{define "delete_feed" -}}
ALTER TABLE {{.Index}} DELETE WHERE organization_id = ? AND kind = ? AND {{template "expiring" .}} AND ? != ''
{{- end}}

{{/* event_index holds no key: its rows are those of the event ids that
     feed_index lists under the predicate, so it is deleted first, while
     feed_index still holds them. Arguments: org, kind, org, kind,
     "expiring", tag. */ -}}
{{define "delete_event_index" -}}
ALTER TABLE {{.EventIndex}} DELETE WHERE organization_id = ? AND kind = ? AND event_id IN (
    SELECT event_id FROM {{.FeedIndex}}
    WHERE organization_id = ? AND kind = ? AND scope = '' AND {{template "expiring" .}}) AND ? != ''
{{- end}}

{{/* The hourly counts of the hours [lo, hi] (execution_hours; the
     entries' are audit_stats' kind 0). Arguments: org, lo, hi, tag. */ -}}
{{define "delete_hours" -}}
ALTER TABLE {{.Hours}} DELETE WHERE organization_id = ? AND hour >= ? AND hour <= ? AND ? != ''
{{- end}}

{{/* audit_stats: kind 0 of the hours [lo, hi], kinds 1 and 2 of the days
     [lo, hi]. Arguments: org, the hours, the days, tag. */ -}}
{{define "delete_stats" -}}
ALTER TABLE {{.Stats}} DELETE WHERE organization_id = ?
    AND ((kind = 0 AND t >= ? AND t <= ?) OR (kind != 0 AND t >= ? AND t <= ?)) AND ? != ''
{{- end}}

{{/* The counts of those hours and days again, from the rows that stay (not
     "expiring": the entries may still be there), each entry once (LIMIT 1
     BY event_id, as the listings), with the SELECT of the materialized
     view (0002, 0005, 0007). Arguments: org, a range of the time that
     holds the hours (days), the hours (days), "expiring"; for the stats,
     then the hours and the days again. */ -}}
{{define "recount_execution_hours" -}}
INSERT INTO execution_hours (organization_id, project_id, hour, n)
SELECT organization_id, project_id,
       intDiv(started_ms, 3600000) * 3600000 AS hour, count() AS n
FROM (
    SELECT organization_id, project_id, started_ms, event_id
    FROM tool_executions
    WHERE organization_id = ? AND started_ms > ? AND started_ms < ?
      AND intDiv(started_ms, 3600000) * 3600000 >= ? AND intDiv(started_ms, 3600000) * 3600000 <= ?
      AND NOT ({{template "expiring" .}})
    LIMIT 1 BY event_id)
GROUP BY organization_id, project_id, hour
{{- end}}

{{define "recount_audit_stats" -}}
INSERT INTO audit_stats (organization_id, kind, scope, t, value, action, source, resource_type, n)
SELECT organization_id,
       arrayJoin([toUInt8(0), toUInt8(1), toUInt8(2)]) AS kind,
       arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       if(kind = 0, intDiv(ts_ms, 3600000) * 3600000, intDiv(ts_ms, 86400000) * 86400000) AS t,
       multiIf(kind = 1, principal_id, kind = 2, ifNull(resource_id, ''), '') AS value,
       if(kind = 2, toUInt8(0), action) AS action,
       if(kind = 2, toUInt8(0), source) AS source,
       ifNull(resource_type, toUInt8(0)) AS resource_type,
       count() AS n
FROM (
    SELECT organization_id, project_id, ts_ms, principal_id, resource_id, action, source, resource_type, event_id
    FROM audit_logs
    WHERE organization_id = ? AND ts_ms > ? AND ts_ms < ?
      AND intDiv(ts_ms, 86400000) * 86400000 >= ? AND intDiv(ts_ms, 86400000) * 86400000 <= ?
      AND NOT ({{template "expiring" .}})
    LIMIT 1 BY event_id)
GROUP BY organization_id, kind, scope, t, value, action, source, resource_type
HAVING (kind = 0 AND t >= ? AND t <= ?) OR (kind != 0 AND t >= ? AND t <= ?)
{{- end}}

{{/* How many mutations of a run (its tag in the command) the server
     knows in the database, and how many of them are done. */ -}}
{{define "mutations" -}}
SELECT count(), countIf(is_done = 1)
FROM system.mutations
WHERE database = ? AND position(command, ?) > 0
{{- end}}

{{/* The kept ids of a run held by this server's replica of
     lifecycle_keep (cluster: .KeepTable names lifecycle_keep_local). */ -}}
{{define "keep_count" -}}
SELECT count() FROM {{.KeepTable}} WHERE organization_id = ? AND kind = ? AND run = ?
{{- end}}

{{define "delete_keep" -}}
ALTER TABLE {{.KeepTable}} DELETE WHERE organization_id = ? AND kind = ? AND run = ?
{{- end}}
