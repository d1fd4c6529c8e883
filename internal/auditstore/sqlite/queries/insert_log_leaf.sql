INSERT INTO log_leaves (log_id, idx, event_id, seq, created_ms)
VALUES (?, ?, ?, ?, ?)
