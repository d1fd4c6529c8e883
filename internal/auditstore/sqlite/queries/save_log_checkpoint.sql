-- One checkpoint per size: a newer one (by time) replaces the stored one.
INSERT INTO log_checkpoints (organization_id, kind, size, root, time_ms, key_id, note)
VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (organization_id, kind, size) DO UPDATE SET
    root = excluded.root, time_ms = excluded.time_ms, key_id = excluded.key_id, note = excluded.note
WHERE excluded.time_ms > log_checkpoints.time_ms
