{{/* A log's stored hashes at a list of indexes, rendered as integer
     literals (points of the primary key), the newest write of each. */ -}}
SELECT idx, hash
FROM log_hashes
WHERE organization_id = ? AND kind = ? AND idx IN ({{.}})
ORDER BY idx, ver DESC
LIMIT 1 BY idx
