INSERT OR REPLACE INTO log_expiries (log_id, record_leaf, record, below_leaf, last_seq, last_created_ms,
    last_event_id, cutoff_ms, retention_ms, kept, expired, holds, time_ms, done)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
