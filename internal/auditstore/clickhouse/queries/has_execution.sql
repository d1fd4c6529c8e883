-- How many copies of the execution with this event id are stored for the
-- organization (and project, '' = any) with lo <= started_ms < hi (0: none).
-- Bounded in time as has_audit.sql, for the sort key (organization_id,
-- started_ms, event_id). Arguments: org, lo, hi, id, project, project.
SELECT count()
FROM tool_executions
WHERE organization_id = ?
  AND started_ms >= ? AND started_ms < ?
  AND event_id = ?
  AND (? = '' OR project_id = ?)
