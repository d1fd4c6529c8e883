{{/* Per log, the newest version of the tile segments that an append that
     crashed left at or beyond its size (AppendLog, AppendLogs: the next
     append writes above it). {{.}} is one "(organization_id = ? AND kind
     = ? AND (<levels>))" per log joined by OR, where <levels> is "level =
     L AND n >= F" for each level whose first tile reachable from the size
     is F > 0, then "level >= L" for the rest: ranges of the primary key. */ -}}
SELECT organization_id, kind, max(ver)
FROM log_tiles
WHERE {{.}}
GROUP BY organization_id, kind
