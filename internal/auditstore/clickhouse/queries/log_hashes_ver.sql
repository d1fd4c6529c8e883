-- The newest version among a log's stored hashes from an index on (the
-- rows an append that crashed left above the size; none, 0, normally).
SELECT max(ver)
FROM log_hashes
WHERE organization_id = ? AND kind = ? AND idx >= ?
