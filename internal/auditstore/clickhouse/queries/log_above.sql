-- Per log, the rows that an append that crashed left above its size: how
-- many leaves and their newest version, and the newest version of the
-- hashes (AppendLogs). {{.Table}} is log_leaves or log_hashes; {{.Logs}}
-- is one "(organization_id = ? AND kind = ? AND idx >= ?)" per log, joined
-- by OR (a range of the primary key each).
SELECT organization_id, kind, count(), max(ver)
FROM {{.Table}}
WHERE {{.Logs}}
GROUP BY organization_id, kind
