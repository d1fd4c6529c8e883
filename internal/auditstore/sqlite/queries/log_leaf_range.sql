-- LeafRange: a log's leaves lo <= idx < hi, in order (the log's number by
-- the unique key of log_heads, then a range of log_leaves' primary key).
SELECT f.idx, f.event_id, f.seq, f.created_ms
FROM log_heads AS l
JOIN log_leaves AS f ON f.log_id = l.log_id
WHERE l.organization_id = ? AND l.kind = ? AND f.idx >= ? AND f.idx < ?
ORDER BY f.idx
