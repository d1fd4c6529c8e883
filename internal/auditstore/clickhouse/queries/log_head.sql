-- A log's head: the row of the largest size (a point of the primary key;
-- one row per unmerged part).
SELECT size, event_id, seq, created_ms
FROM log_heads
WHERE organization_id = ? AND kind = ?
ORDER BY size DESC
LIMIT 1
