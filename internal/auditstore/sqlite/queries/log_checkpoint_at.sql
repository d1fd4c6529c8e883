-- A log's checkpoint of one size (a point of the primary key).
SELECT c.size, c.root, c.time_ms, c.key_id, c.note
FROM log_heads AS l
JOIN log_checkpoints AS c ON c.log_id = l.log_id
WHERE l.organization_id = ? AND l.kind = ? AND c.size = ?
