INSERT INTO log_heads (organization_id, kind, size, event_id, seq, created_ms)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (organization_id, kind) DO UPDATE SET
    size = excluded.size, event_id = excluded.event_id, seq = excluded.seq, created_ms = excluded.created_ms
