SELECT record_leaf, record, below_leaf, last_seq, last_created_ms, last_event_id, cutoff_ms,
       retention_ms, kept, expired, holds, time_ms, done
FROM log_expiries
WHERE log_id = ?
ORDER BY record_leaf DESC
LIMIT 1
