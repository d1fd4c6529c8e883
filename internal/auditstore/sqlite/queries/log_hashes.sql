-- A log's stored hashes at the indexes of a JSON array (the log's number
-- by the unique key of log_heads, then points of the primary key).
SELECT h.idx, h.hash
FROM log_heads AS l
JOIN log_hashes AS h ON h.log_id = l.log_id
WHERE l.organization_id = ? AND l.kind = ? AND h.idx IN (SELECT value FROM json_each(?))
