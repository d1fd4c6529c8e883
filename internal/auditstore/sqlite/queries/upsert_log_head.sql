-- A log's new head (its number chosen by SQLite on the first append).
INSERT INTO log_heads (organization_id, kind, size, event_id, seq, created_ms)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (organization_id, kind) DO UPDATE SET
    size = excluded.size, event_id = excluded.event_id, seq = excluded.seq, created_ms = excluded.created_ms
RETURNING log_id
