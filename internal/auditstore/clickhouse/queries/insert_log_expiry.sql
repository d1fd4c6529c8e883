INSERT INTO log_expiries (organization_id, kind, record_leaf, record, below_leaf, last_seq, last_created_ms, last_event_id,
    cutoff_ms, retention_ms, kept, expired, holds, time_ms, done, ver)
