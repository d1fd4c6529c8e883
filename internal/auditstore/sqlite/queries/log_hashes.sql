-- A log's stored hashes at the indexes of a JSON array (points of the
-- primary key).
SELECT idx, hash
FROM log_hashes
WHERE organization_id = ? AND kind = ? AND idx IN (SELECT value FROM json_each(?))
