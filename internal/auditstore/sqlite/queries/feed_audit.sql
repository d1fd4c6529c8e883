{{/* One page of an organization's (or a project's) audit feed: entries in
     persistence order (seq, created_ms, event_id) after the cursor, up to
     the watermark. The cursor is a row-value range on the index
     (organization_id[, project_id], seq, created_ms, event_id), so SQLite
     seeks to it; the filters and the terms of a search (search.sql) are
     residual. The index is named: with the range on seq bounded on both
     sides, the planner otherwise reads a project's feed through the
     organization's index and skips the other projects' rows one by one. Seq 0 (entries stored before the feed) is below any
     watermark. */ -}}
SELECT event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms, salt, seq
FROM audit_logs INDEXED BY {{if .Project}}audit_logs_project_feed{{else}}audit_logs_org_feed{{end}}
{{template "feed_where" .}}
  AND (:action IS NULL OR action = :action)
  AND (:source IS NULL OR source = :source)
  AND (:resource_type IS NULL OR resource_type = :resource_type)
ORDER BY seq, created_ms, event_id
LIMIT :limit
