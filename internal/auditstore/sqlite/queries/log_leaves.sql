-- A log's leaves lo <= idx < hi, in order (a range of the primary key).
SELECT idx, event_id, seq, created_ms
FROM log_leaves
WHERE log_id = ? AND idx >= ? AND idx < ?
ORDER BY idx
