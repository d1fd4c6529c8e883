-- A log's number and head: its size and last leaf (no row: no log yet).
SELECT log_id, size, event_id, seq, created_ms
FROM log_heads
WHERE organization_id = ? AND kind = ?
