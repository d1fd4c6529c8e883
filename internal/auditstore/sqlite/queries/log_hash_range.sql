-- A log's stored hashes lo <= idx < hi, in order (the log's number by the
-- unique key of log_heads, then a range of the primary key): LeafTile's
-- tile.
SELECT h.idx, h.hash
FROM log_heads AS l
JOIN log_hashes AS h ON h.log_id = l.log_id
WHERE l.organization_id = ? AND l.kind = ? AND h.idx >= ? AND h.idx < ?
ORDER BY h.idx
