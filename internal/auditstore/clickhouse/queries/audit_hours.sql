-- The hourly counts of an organization's entries (scope '') or of a
-- project's (scope its id) up to an hour, newest first: audit_stats' kind
-- 0 (schemas/clickhouse/0020_audit_hours_from_stats.sql), summed over its
-- action, source and resource type.
SELECT t AS hour, sum(n) AS n
FROM audit_stats
WHERE organization_id = ?
  AND kind = 0
  AND scope = ?
  AND t <= ?
GROUP BY hour
ORDER BY hour DESC
