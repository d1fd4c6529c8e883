SELECT event_id, id, ts_ms, client_ip, action, source, display_name, customer_id,
       organization_id, project_id, principal_id, user_id, principal_type,
       resource_type, resource_id, resource_display, data, created_ms
FROM audit_logs
WHERE organization_id = :org
  AND project_id = :project
  AND (:action IS NULL OR action = :action)
  AND (:source IS NULL OR source = :source)
  AND (:resource_type IS NULL OR resource_type = :resource_type)
  AND (:after_ts IS NULL OR ts_ms < :after_ts OR (ts_ms = :after_ts AND event_id < :after_id))
ORDER BY ts_ms DESC, event_id DESC
LIMIT :limit
