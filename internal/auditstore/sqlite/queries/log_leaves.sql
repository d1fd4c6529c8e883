-- A log's leaves lo <= idx < hi, in order (a range of the primary key).
SELECT idx, event_id, seq, created_ms
FROM log_leaves
WHERE organization_id = ? AND kind = ? AND idx >= ? AND idx < ?
ORDER BY idx
