SELECT organization_id, event_id, execution_id, project_id, user_id, toolkit, tool_name, tool_version,
       started_ms, ended_ms, duration_ms, success, execution_code, execution_error, error_kind, hooks, created_ms
FROM tool_executions
WHERE organization_id = :org
  AND (:project IS NULL OR project_id = :project)
  AND (:success IS NULL OR success = :success)
  AND (:after_ts IS NULL OR started_ms < :after_ts OR (started_ms = :after_ts AND event_id < :after_id))
ORDER BY started_ms DESC, event_id DESC
LIMIT :limit
