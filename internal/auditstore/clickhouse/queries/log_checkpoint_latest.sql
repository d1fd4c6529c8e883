-- A log's latest checkpoint in one query: the largest size (a scalar
-- subquery reading one column of the log's checkpoints: 18.16 cannot read
-- a key backwards), then the newest checkpoint of that size (a point of
-- the primary key). Without checkpoints max() is 0 and no row matches
-- unless one of size 0 is stored: either way the answer is right.
SELECT size, root, time_ms, key_id, note
FROM log_checkpoints
WHERE organization_id = ? AND kind = ?
  AND size = (SELECT max(size) FROM log_checkpoints WHERE organization_id = ? AND kind = ?)
ORDER BY time_ms DESC, length(note) DESC
LIMIT 1
