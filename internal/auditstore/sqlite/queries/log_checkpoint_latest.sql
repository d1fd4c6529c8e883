-- A log's checkpoint of the largest size (the last row of the primary
-- key's range).
SELECT c.size, c.root, c.time_ms, c.key_id, c.note
FROM log_heads AS l
JOIN log_checkpoints AS c ON c.log_id = l.log_id
WHERE l.organization_id = ? AND l.kind = ?
ORDER BY c.size DESC
LIMIT 1
