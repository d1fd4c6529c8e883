{{/* The erasure's queries (erasure.go): the rewrite of some entries of an
     organization, of one kind (audit_logs or tool_executions, .Table,
     whose time column is .TS). The lists are rendered in Go, one ? per
     value: .IDs (event ids), .Times (the entries' times, which bound the
     reads and the mutation by the sort key and the partitions), .Set
     (the assignments of the mutation: col = multiIf(event_id IN (…), ?,
     …, col)), .Principal and .Resource (the same expressions for
     principal_id and resource_id, or the columns themselves), .Days,
     .Ranges and .Values (the aggregates touched). */ -}}

{{/* Which of the ids are stored, and at what times: points of the sort
     key of event_index (.EventIndex: qualified, the local table of a
     cluster's node, each asked in turn; an event written twice at two
     times lists both). Arguments: org, kind, .IDs. */ -}}
{{define "stored" -}}
SELECT event_id, groupUniqArray(ts_ms)
FROM {{.EventIndex}}
WHERE organization_id = ? AND kind = ? AND event_id IN ({{.IDs}})
GROUP BY event_id
{{- end}}

{{/* The principal and resource of the stored entries as they are now
     (.Table: audit_logs, qualified as .EventIndex). Arguments: org,
     .Times, .IDs. */ -}}
{{define "current" -}}
SELECT DISTINCT event_id, principal_id, ifNull(resource_id, '')
FROM {{.Table}}
WHERE organization_id = ? AND ts_ms IN ({{.Times}}) AND event_id IN ({{.IDs}})
{{- end}}

{{/* The rewrite of the entries (every copy of each): one mutation, of
     the erasable columns only (not leaf). .Entries is the table's name,
     qualified, the local one on a cluster. Arguments: those of .Set,
     org, .Times, .IDs, tag. */ -}}
{{define "rewrite" -}}
ALTER TABLE {{.Entries}} UPDATE {{.Set}}
WHERE organization_id = ? AND {{.TS}} IN ({{.Times}}) AND event_id IN ({{.IDs}}) AND ? != ''
{{- end}}

{{/* audit_stats: the tops (kinds 1 and 2) of the days touched, for the
     values that the rewrite takes away or brings (.Values: (kind = 1 AND
     value IN (…)) OR (kind = 2 AND value IN (…))). value is in the sort
     key: these rows cannot be updated, they are deleted and counted
     again. Arguments: org, .Days, .Values, tag. */ -}}
{{define "delete_stats" -}}
ALTER TABLE {{.Stats}} DELETE WHERE organization_id = ? AND kind IN (1, 2) AND t IN ({{.Days}}) AND ({{.Values}}) AND ? != ''
{{- end}}

{{/* Those rows counted again, from the entries of those days with the
     values they have once rewritten (.Principal, .Resource: the
     rewrite's expressions), each entry once (LIMIT 1 BY event_id), with
     the SELECT of the materialized view (0007) for kinds 1 and 2; through
     the Distributed tables on a cluster. Arguments: those of .Principal
     and .Resource, org, .Ranges (starts and ends of runs of days), .Days,
     .Values. */ -}}
{{define "recount_stats" -}}
INSERT INTO audit_stats (organization_id, kind, scope, t, value, action, source, resource_type, n)
SELECT organization_id,
       arrayJoin([toUInt8(1), toUInt8(2)]) AS kind,
       arrayJoin(if(isNull(project_id), [''], ['', ifNull(project_id, '')])) AS scope,
       intDiv(ts_ms, 86400000) * 86400000 AS t,
       if(kind = 1, erased_principal, ifNull(erased_resource, '')) AS value,
       if(kind = 2, toUInt8(0), action) AS action,
       if(kind = 2, toUInt8(0), source) AS source,
       ifNull(resource_type, toUInt8(0)) AS resource_type,
       count() AS n
FROM (
    SELECT organization_id, project_id, ts_ms, action, source, resource_type, event_id,
           {{.Principal}} AS erased_principal, {{.Resource}} AS erased_resource
    FROM audit_logs
    WHERE organization_id = ? AND ({{.Ranges}})
      AND intDiv(ts_ms, 86400000) * 86400000 IN ({{.Days}})
    LIMIT 1 BY event_id)
GROUP BY organization_id, kind, scope, t, value, action, source, resource_type
HAVING {{.Values}}
{{- end}}
