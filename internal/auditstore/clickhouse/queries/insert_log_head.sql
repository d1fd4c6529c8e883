INSERT INTO log_heads (organization_id, kind, size, event_id, seq, created_ms)
