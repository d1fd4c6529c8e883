-- A log's leaves lo <= idx < hi (a range of the primary key), the newest
-- write of each, with its version.
SELECT idx, event_id, seq, created_ms, ver
FROM log_leaves
WHERE organization_id = ? AND kind = ? AND idx >= ? AND idx < ?
ORDER BY idx, ver DESC
LIMIT 1 BY idx
