-- A log's checkpoint of one size (a point of the primary key).
SELECT size, root, time_ms, key_id, note
FROM log_checkpoints
WHERE organization_id = ? AND kind = ? AND size = ?
