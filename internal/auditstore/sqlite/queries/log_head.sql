-- A log's head: its size and last leaf (no row: an empty log).
SELECT size, event_id, seq, created_ms
FROM log_heads
WHERE organization_id = ? AND kind = ?
