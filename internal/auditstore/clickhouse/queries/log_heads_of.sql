-- The sizes of the logs named in the external table logs
-- (organization_id, kind): the largest size of each (AppendLogs).
SELECT organization_id, kind, max(size)
FROM log_heads
WHERE (organization_id, kind) IN (SELECT organization_id, kind FROM logs)
GROUP BY organization_id, kind
