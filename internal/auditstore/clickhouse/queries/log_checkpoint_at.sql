-- A log's checkpoint of one size, the newest (a point of the primary key).
SELECT size, root, time_ms, key_id, note
FROM log_checkpoints
WHERE organization_id = ? AND kind = ? AND size = ?
ORDER BY time_ms DESC, length(note) DESC
LIMIT 1
