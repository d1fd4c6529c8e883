-- A log's checkpoint of the largest size (the last row of the primary
-- key's range).
SELECT size, root, time_ms, key_id, note
FROM log_checkpoints
WHERE organization_id = ? AND kind = ?
ORDER BY size DESC
LIMIT 1
