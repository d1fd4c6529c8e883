INSERT INTO log_checkpoints (organization_id, kind, size, root, time_ms, key_id, note)
