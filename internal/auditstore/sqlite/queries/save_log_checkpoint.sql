-- One checkpoint per size: a newer one (by time) replaces the stored one.
INSERT INTO log_checkpoints (log_id, size, root, time_ms, key_id, note)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (log_id, size) DO UPDATE SET
    root = excluded.root, time_ms = excluded.time_ms, key_id = excluded.key_id, note = excluded.note
WHERE excluded.time_ms > log_checkpoints.time_ms
