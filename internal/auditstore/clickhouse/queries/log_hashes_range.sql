-- A log's stored hashes with indexes in a range (a tile's: the leaf
-- hashes and the nodes between them), the newest write of each: one range
-- of the primary key, cheaper to parse and plan than hundreds of points.
-- Arguments: org, kind, the first and the last index.
SELECT idx, hash
FROM log_hashes
WHERE organization_id = ? AND kind = ? AND idx >= ? AND idx <= ?
ORDER BY idx, ver DESC
LIMIT 1 BY idx
