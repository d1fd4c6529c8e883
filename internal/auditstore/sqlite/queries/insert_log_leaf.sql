INSERT INTO log_leaves (organization_id, kind, idx, event_id, seq, created_ms)
VALUES (?, ?, ?, ?, ?, ?)
