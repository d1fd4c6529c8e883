{{/* A log's tiles, segment by segment (the newest write of each
     (level, n, start)): {{.}} is "(level = L AND n = N)" per tile joined
     by OR, integer literals, ranges of the primary key. */ -}}
SELECT level, n, start, hashes
FROM log_tiles
WHERE organization_id = ? AND kind = ? AND ({{.}})
ORDER BY level, n, start, ver DESC
LIMIT 1 BY level, n, start
