-- A log's expiry of the largest record_leaf, its newest save (ver: a done
-- save above the others), before or after the merges fold the copies.
SELECT record_leaf, record, below_leaf, last_seq, last_created_ms, last_event_id, cutoff_ms,
       retention_ms, kept, expired, holds, time_ms, done
FROM log_expiries
WHERE organization_id = ? AND kind = ?
ORDER BY record_leaf DESC, ver DESC
LIMIT 1
