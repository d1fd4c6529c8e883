-- One page of an organization's entries, newest first, ties by event_id.
-- Parameters: org; project ('' = any); action, source, resource_type (-1 = any);
-- has_after, after_ts, after_ts, after_id (keyset); min_ts, max_ts (the hours
-- to scan, from audit_hours); limit.
-- LIMIT 1 BY event_id hides redelivered copies that no merge has folded yet,
-- keeping the first write (smallest created_ms).
SELECT event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms
FROM audit_logs
WHERE organization_id = ?
  AND (? = '' OR project_id = ?)
  AND (? < 0 OR action = ?)
  AND (? < 0 OR source = ?)
  AND (? < 0 OR resource_type = ?)
  AND (? = 0 OR ts_ms < ? OR (ts_ms = ? AND event_id < ?))
  AND ts_ms >= ? AND ts_ms < ?
ORDER BY ts_ms DESC, event_id DESC, created_ms ASC
LIMIT 1 BY event_id
LIMIT ?
