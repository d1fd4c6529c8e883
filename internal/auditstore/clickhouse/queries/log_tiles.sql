{{/* Logs' tiles, segment by segment (the newest write of each
     (organization_id, level, n, start)): {{.}} is
     "(organization_id = 'O' AND level = L AND n = N)" per tile joined by
     OR, a uuid's canonical text and integer literals, ranges of the
     primary key; the tiles of one log, or of several (the checks of a
     round's checkpoints). Arguments: kind. */ -}}
SELECT organization_id, level, n, start, hashes
FROM log_tiles
WHERE kind = ? AND ({{.}})
ORDER BY organization_id, level, n, start, ver DESC
LIMIT 1 BY organization_id, level, n, start
